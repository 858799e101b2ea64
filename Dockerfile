# The kinference CLI image: collector, emulator, explain (and the demo's stand-in).
# Build from the repository root:  docker build -t kinference .
# Run:  docker run --rm kinference collector --config /etc/kinference/fleet.yaml
ARG NODE_IMAGE=node:20-bookworm
ARG NODE_RUNTIME_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_RUNTIME_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
# The whole pruned tree: dist/ plus the files it reads at run time (Lua scripts, tokenizer data).
COPY --from=build --chown=node:node /app /app
USER node
EXPOSE 8000 9090
ENTRYPOINT ["node", "/app/bin/kinference.js"]
CMD ["--help"]
