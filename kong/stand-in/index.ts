/** The Kong stand-in's public surface, for tests, the demo and the benchmark. */
export {
  startGateway,
  stderrLogger,
  type Gateway,
  type GatewayOptions,
  type GatewayEvent,
} from './gateway.js';
export { MsgpackRpcClient, RpcError } from './rpc-client.js';
export { runEvent, type EventResult, type PdkHandler, type PdkOutcome, type PdkStep } from './bridge.js';
export { PluginServerProcess, queryPlugin, type PluginInfo, type PluginServerDef } from './plugin-server.js';
export {
  jsPluginServerDef,
  type JsPluginServerOptions,
  defaultPluginsDir,
  kongJsPluginServerBin,
  packageRoot,
} from './plugin-server-defs.js';
export { parseDeclarative, loadDeclarative, type DeclarativeConfig } from './declarative.js';
export { processPluginConfig } from './process-config.js';
