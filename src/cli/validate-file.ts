// `kinference validate`'s checks: each kinference plugin entry of a file, against the plugin's own schema.
// decK/Kong declarative files, KongPlugin manifests or fleet files; errors said in words (config/validate.ts).
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { LineCounter, parseAllDocuments, type Document } from 'yaml';
import { isKinferenceError } from '../core/errors.js';
import { isRecord } from '../core/is-record.js';
import { FleetConfigSchema, parseFleetConfig } from '../config/fleet-config.js';
import {
  defaultTemplateKwargs,
  PluginConfigSchema,
  pluginConfigProblems,
  type PluginConfig,
} from '../config/plugin-config.js';
import { checkConfig, closestKey } from '../config/validate.js';

export type FileKind = 'kong' | 'kic' | 'fleet';

/** One problem: the entry (route, service, … and its index path), the field, what is wrong, the line. */
export interface Finding {
  where: string;
  field: string;
  message: string;
  line?: number;
}

export interface FileReport {
  file: string;
  kind: FileKind | null;
  /** kinference plugin entries checked (models for a fleet file). */
  entries: number;
  problems: Finding[];
}

export interface ValidateOptions {
  kind?: FileKind;
  /** Also load the tokenizer and template files (and check the TLS files): where the gateway runs only. */
  checkFiles?: boolean;
}

const PLUGIN = 'kinference';
/** The fields of a Kong plugin entity (besides config), as decK writes them. */
const PLUGIN_ENTITY_KEYS = [
  'id',
  'name',
  'config',
  'enabled',
  'protocols',
  'route',
  'service',
  'consumer',
  'consumer_group',
  'instance_name',
  'tags',
  'ordering',
  'created_at',
  'updated_at',
];
/** Kong entities that carry nested plugins in a declarative file, and the key that names each. */
const NESTING: Record<string, string> = {
  services: 'service',
  routes: 'route',
  consumers: 'consumer',
  consumer_groups: 'consumer group',
};
const KIC_KINDS = new Set(['KongPlugin', 'KongClusterPlugin']);

type Path = (string | number)[];

/** "services[0].routes[1].plugins[0]" */
function pathText(path: Path): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

/** A decK entity's label: its name (or username), else nothing. */
function label(entity: Record<string, unknown>): string | null {
  const n = entity.name ?? entity.username ?? entity.id;
  return typeof n === 'string' ? JSON.stringify(n) : null;
}

interface Entry {
  where: string;
  path: Path;
  doc: number;
  config: unknown;
  entity: Record<string, unknown>;
}

/** Every plugin entry of a Kong declarative document, with the chain of entities it hangs under. */
function kongEntries(root: Record<string, unknown>, doc: number): { entries: Entry[]; others: Entry[] } {
  const entries: Entry[] = [];
  const others: Entry[] = [];
  const visit = (node: Record<string, unknown>, path: Path, chain: string[]): void => {
    const plugins = node.plugins;
    if (Array.isArray(plugins))
      plugins.forEach((p, i) => {
        if (!isRecord(p)) return;
        const scope = [...chain];
        for (const k of ['service', 'route', 'consumer'] as const)
          if (p[k] !== undefined)
            scope.push(`${k} ${JSON.stringify(isRecord(p[k]) ? (p[k].name ?? p[k].id) : p[k])}`);
        const at = [...path, 'plugins', i];
        const where = `${scope.length ? `${scope.join(' › ')} ` : ''}(${pathText(at)})`;
        (p.name === PLUGIN ? entries : others).push({ where, path: at, doc, config: p.config, entity: p });
      });
    for (const [key, what] of Object.entries(NESTING)) {
      const list = node[key];
      if (Array.isArray(list))
        list.forEach((e, i) => {
          if (!isRecord(e)) return;
          const name = label(e);
          visit(e, [...path, key, i], [...chain, name ? `${what} ${name}` : `${what} #${i}`]);
        });
    }
  };
  visit(root, [], []);
  return { entries, others };
}

function detect(docs: unknown[]): FileKind | null {
  if (docs.some((d) => isRecord(d) && typeof d.kind === 'string' && KIC_KINDS.has(d.kind))) return 'kic';
  const first = docs.find(isRecord);
  if (!first) return null;
  if ('_format_version' in first || ['services', 'routes', 'plugins', 'consumers'].some((k) => k in first))
    return 'kong';
  if ('models' in first) return 'fleet';
  return null;
}

/** "field: message" (pluginConfigProblems, fleet problems) → its parts. */
function splitProblem(p: string): { field: string; message: string } {
  const i = p.indexOf(': ');
  return i < 0 ? { field: '', message: p } : { field: p.slice(0, i), message: p.slice(i + 2) };
}

/** The line of the deepest node of `path` the document has (1-based), for an editor to jump to. */
function lineOf(doc: Document | undefined, lines: LineCounter, path: Path): number | undefined {
  if (!doc) return undefined;
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    if (node?.range) return lines.linePos(node.range[0]).line;
  }
  return undefined;
}

/** The files a config names, loaded as the gateway would (relative paths against the working directory). */
async function fileProblems(
  c: Pick<PluginConfig, 'tokenizer' | 'chat_template' | 'default_chat_template_kwargs'> &
    Partial<Pick<PluginConfig, 'redis_tls_ca_file' | 'redis_tls_cert_file' | 'redis_tls_key_file'>>,
): Promise<{ field: string; message: string }[]> {
  const out: { field: string; message: string }[] = [];
  const { loadTokenizer } = await import('../tokenize/load-tokenizer.js');
  const { loadChatTemplate } = await import('../tokenize/load-chat-template.js');
  const attempt = (field: string, load: () => unknown): void => {
    try {
      load();
    } catch (e) {
      out.push({ field, message: (e as Error).message });
    }
  };
  attempt('tokenizer', () => loadTokenizer(c.tokenizer));
  attempt('chat_template', () =>
    loadChatTemplate(c.chat_template, defaultTemplateKwargs(c.default_chat_template_kwargs)),
  );
  for (const f of ['redis_tls_ca_file', 'redis_tls_cert_file', 'redis_tls_key_file'] as const) {
    const path = c[f];
    if (path !== undefined) attempt(f, () => readFileSync(path));
  }
  return out;
}

/** One plugin config against the plugin's schema and its cross-field rules, fields as `config.<field>`. */
async function checkPluginConfig(
  config: unknown,
  checkFiles: boolean,
): Promise<{ field: string; message: string }[]> {
  if (config !== undefined && config !== null && !isRecord(config))
    return [{ field: 'config', message: 'expected a mapping of the plugin fields (key: value)' }];
  const { value, issues } = checkConfig(PluginConfigSchema, config ?? {}, 50);
  const problems = issues.length > 0 ? issues : pluginConfigProblems(value).map(splitProblem);
  if (problems.length === 0 && checkFiles) problems.push(...(await fileProblems(value)));
  return problems.map((p) => ({ field: `config.${p.field}`, message: p.message }));
}

async function checkKong(
  docs: unknown[],
  parsed: Document[],
  lines: LineCounter,
  opts: ValidateOptions,
): Promise<Omit<FileReport, 'file' | 'kind'>> {
  const problems: Finding[] = [];
  let entries = 0;
  for (const [d, root] of docs.entries()) {
    if (!isRecord(root)) continue;
    const found = kongEntries(root, d);
    for (const o of found.others)
      if (typeof o.entity.name === 'string' && closestKey(o.entity.name, [PLUGIN]) === PLUGIN)
        problems.push({
          where: o.where,
          field: 'name',
          message: `plugin "${o.entity.name}": did you mean "${PLUGIN}"?`,
          line: lineOf(parsed[d], lines, [...o.path, 'name']),
        });
    for (const e of found.entries) {
      entries++;
      for (const key of Object.keys(e.entity))
        if (!PLUGIN_ENTITY_KEYS.includes(key)) {
          const near = closestKey(key, PLUGIN_ENTITY_KEYS);
          problems.push({
            where: e.where,
            field: key,
            message: `unknown key of a plugin entry; ${near ? `did you mean "${near}"?` : `known keys: ${PLUGIN_ENTITY_KEYS.join(', ')}`}`,
            line: lineOf(parsed[d], lines, [...e.path, key]),
          });
        }
      for (const p of await checkPluginConfig(e.config, opts.checkFiles === true))
        problems.push({
          where: e.where,
          ...p,
          line: lineOf(parsed[d], lines, [...e.path, ...p.field.split('.')]),
        });
    }
  }
  return { entries, problems };
}

async function checkKic(
  docs: unknown[],
  parsed: Document[],
  lines: LineCounter,
  opts: ValidateOptions,
): Promise<Omit<FileReport, 'file' | 'kind'>> {
  const problems: Finding[] = [];
  let entries = 0;
  for (const [d, m] of docs.entries()) {
    if (!isRecord(m) || typeof m.kind !== 'string' || !KIC_KINDS.has(m.kind) || m.plugin !== PLUGIN) continue;
    entries++;
    const name = isRecord(m.metadata) && typeof m.metadata.name === 'string' ? m.metadata.name : '?';
    const where = `${m.kind} ${JSON.stringify(name)} (document ${d + 1})`;
    // configFrom takes the config from a Secret, which is not in the file: only what is here is checked.
    if (m.config === undefined && m.configFrom !== undefined) continue;
    for (const p of await checkPluginConfig(m.config, opts.checkFiles === true))
      problems.push({ where, ...p, line: lineOf(parsed[d], lines, p.field.split('.')) });
  }
  return { entries, problems };
}

async function checkFleet(
  path: string,
  raw: unknown,
  parsed: Document | undefined,
  lines: LineCounter,
  opts: ValidateOptions,
): Promise<Omit<FileReport, 'file' | 'kind'>> {
  const at = (field: string, message: string): Finding => ({
    where: 'fleet file',
    field,
    message,
    line: lineOf(parsed, lines, field.split('.')),
  });
  const entries = isRecord(raw) && isRecord(raw.models) ? Object.keys(raw.models).length : 0;
  // The schema first, for every problem at once; then the fleet's own rules, as the collector loads it.
  const { issues } = checkConfig(FleetConfigSchema, raw, 50);
  if (issues.length > 0) return { entries, problems: issues.map((i) => at(i.field, i.message)) };
  try {
    const cfg = parseFleetConfig(raw, path, dirname(resolve(path)));
    const problems: Finding[] = [];
    if (opts.checkFiles)
      for (const [name, m] of Object.entries(cfg.models))
        for (const p of await fileProblems({ ...cfg, ...m })) {
          const top = p.field.startsWith('redis_');
          if (!top || name === Object.keys(cfg.models)[0])
            problems.push(at(top ? p.field : `models.${name}.${p.field}`, p.message));
        }
    return { entries, problems };
  } catch (e) {
    if (!isKinferenceError(e)) throw e;
    const lines2 = e.message.split('\n').slice(1);
    return {
      entries,
      problems: lines2.map((l) => splitProblem(l.trim())).map((p) => at(p.field, p.message)),
    };
  }
}

/** Checks one file; every problem is reported (none thrown), so that CI gets them all at once. */
export async function validateFile(file: string, opts: ValidateOptions = {}): Promise<FileReport> {
  const fail = (message: string, kind: FileKind | null = null): FileReport => ({
    file,
    kind,
    entries: 0,
    problems: [{ where: 'file', field: '', message }],
  });
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    return fail(`cannot read: ${(e as Error).message}`);
  }
  // YAML is a superset of JSON: one parser for kong.yaml, kong.json and multi-document manifests.
  const lines = new LineCounter();
  const parsed = parseAllDocuments(text, { lineCounter: lines });
  if (!Array.isArray(parsed)) return fail('empty file: nothing to check');
  const broken = parsed.flatMap((d) => d.errors);
  if (broken.length > 0) return fail(`not valid YAML or JSON: ${broken[0]!.message}`);
  const docs = parsed.map((d) => d.toJS() as unknown);
  const kind = opts.kind ?? detect(docs);
  if (kind === null)
    return fail(
      'not a Kong declarative file (_format_version, services, routes, plugins), a KongPlugin manifest ' +
        '(kind: KongPlugin) or a fleet file (models:); say which with --kind',
    );
  const result =
    kind === 'kong'
      ? await checkKong(docs, parsed, lines, opts)
      : kind === 'kic'
        ? await checkKic(docs, parsed, lines, opts)
        : await checkFleet(file, docs[0], parsed[0], lines, opts);
  if (result.entries === 0 && result.problems.length === 0)
    result.problems.push({
      where: 'file',
      field: '',
      message:
        kind === 'fleet'
          ? 'no model under models: nothing to check'
          : `no ${PLUGIN} plugin entry (name: ${PLUGIN}${kind === 'kic' ? ', or plugin: kinference in a KongPlugin' : ''}): nothing to check`,
    });
  // In file order, as an editor shows them.
  result.problems.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  return { file, kind, ...result };
}

const KIND_TEXT: Record<FileKind, string> = {
  kong: 'Kong declarative file',
  kic: 'KongPlugin manifest',
  fleet: 'fleet file',
};

/** One line per problem: `file:line: where: field: message`; then one summary line per file. */
export function formatReport(r: FileReport): { problems: string[]; summary: string } {
  const problems = r.problems.map((p) => {
    const at = p.line !== undefined ? `${r.file}:${p.line}` : r.file;
    return `${at}: ${p.where}: ${p.field ? `${p.field}: ` : ''}${p.message}`;
  });
  const what = r.kind === 'fleet' ? 'model' : `${PLUGIN} plugin entr`;
  const count =
    r.kind === 'fleet'
      ? `${r.entries} ${what}${r.entries === 1 ? '' : 's'}`
      : `${r.entries} ${what}${r.entries === 1 ? 'y' : 'ies'}`;
  const kind = r.kind ? ` (${KIND_TEXT[r.kind]})` : '';
  const summary =
    r.problems.length === 0
      ? `${r.file}: ${count} valid${kind}`
      : `${r.file}: ${r.problems.length} problem${r.problems.length === 1 ? '' : 's'}${r.entries ? ` in ${count}` : ''}${kind}`;
  return { problems, summary };
}
