/** Types for scripts/bundle-plugin.mjs (tests import it to bundle the plugin into a temp dir). */
export declare const PLUGIN_EXTERNALS: string[];
export declare function bundlePlugin(outRoot?: string): Promise<string>;
