// The plugin's decision metrics: recorded per process, summed in Redis, exported by the collector.
export {
  DECISION_OUTCOMES,
  MAX_CLASSES,
  MAX_MODELS,
  NO_CLASS,
  NO_MODEL,
  OTHER_MODEL,
  PLUGIN_METRIC_PREFIX,
  PLUGIN_SERIES,
  REASONS,
  SHED_CAUSES,
  fieldOf,
  pluginMetricsKey,
  pluginSeriesNames,
  type DecisionOutcome,
  type SeriesKey,
  type ShedCause,
} from './series.js';
export { PluginMetricsRecorder, decisionOutcome, predictedCachedTokens } from './recorder.js';
export { DEFAULT_FLUSH_MS, PluginMetricsFlusher, type FlusherOptions } from './flusher.js';
export { MAX_FIELDS, readPluginSamples, samplesOf, type PluginSample } from './read.js';
