// waitPluginWarm for the specs (re-exported from harness/): wait until a config routes with its tokenizer.
export { waitPluginWarm } from '../../harness/plugin-warm-up.js';
