# The kinference images, two targets of one build:
#   runtime (the default, last stage): the library and its product CLI — collector, explain, verify-tokenizer.
#     docker build -t kinference .
#     docker run --rm kinference collector --config /etc/kinference/fleet.yaml
#   tools: the whole built tree, adding the emulator, the demo and the Kong stand-in (`gateway`).
#     docker build --target tools -t kinference-tools .
# Build from the repository root. docs/deployment.md, "The kinference images", says what each carries.
ARG NODE_IMAGE=node:20-bookworm
ARG NODE_RUNTIME_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# The tools image: the whole pruned tree (compose's emulator profile runs `kinference emulator` from it).
FROM ${NODE_RUNTIME_IMAGE} AS tools
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=node:node /app /app
USER node
EXPOSE 8000 9090
ENTRYPOINT ["node", "/app/bin/kinference.js"]
CMD ["--help"]

# The runtime image: the CLI's composition root (dist/cli), the library (dist/src), the plugin bundle and the
# production node_modules (which hold the tokenizer data). No dist/bench, dist/emulator or dist/kong: the
# composition root registers a tool's command only where the tool is installed, so `kinference --help` here
# lists collector, explain and verify-tokenizer.
FROM ${NODE_RUNTIME_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json /app/package.json
COPY --from=build --chown=node:node /app/bin /app/bin
COPY --from=build --chown=node:node /app/node_modules /app/node_modules
COPY --from=build --chown=node:node /app/dist/cli /app/dist/cli
COPY --from=build --chown=node:node /app/dist/src /app/dist/src
COPY --from=build --chown=node:node /app/dist/plugins /app/dist/plugins
USER node
EXPOSE 9090
ENTRYPOINT ["node", "/app/bin/kinference.js"]
CMD ["--help"]
