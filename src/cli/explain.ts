export async function runExplain(configPath: string, bodyPath: string): Promise<void> {
  throw new Error(`explain not wired yet (${configPath}, ${bodyPath})`);
}
