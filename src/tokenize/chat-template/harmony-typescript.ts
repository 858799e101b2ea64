/**
 * JSON Schema → the TypeScript-like signature openai/harmony renders for function tools
 * (`json_schema_to_typescript` in harmony's src/encoding.rs, which keeps object key order). Ported for the
 * shapes tool schemas use: objects, required/optional, descriptions, titles, examples, defaults, enums,
 * arrays, type unions, nullable and oneOf.
 */
type Schema = Record<string, unknown>;

function isSchema(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const isEnum = (s: Schema): boolean => Array.isArray(s.enum) && s.enum.length > 0;

/** serde_json's Display of a value: compact JSON. */
const display = (v: unknown): string => JSON.stringify(v) ?? 'null';

function defaultComment(s: Schema, quoteStrings: boolean): string | null {
  if (!('default' in s)) return null;
  const d = s.default;
  if (typeof d === 'string') return quoteStrings && !isEnum(s) ? `default: "${d}"` : `default: ${d}`;
  return `default: ${display(d)}`;
}

function withNullable(variant: unknown, ts: string): string {
  return isSchema(variant) && variant.nullable === true && !ts.includes('null') ? `${ts} | null` : ts;
}

function oneOfInline(variants: unknown[], indent: string): string {
  let out = '';
  for (const v of variants) {
    out += `\n${indent} | ${withNullable(v, schemaToTypescript(v, `${indent}   `))}`;
    if (!isSchema(v)) continue;
    const comments: string[] = [];
    if (typeof v.description === 'string') comments.push(v.description);
    if ('default' in v)
      comments.push(
        typeof v.default === 'string' && !isEnum(v)
          ? `default: "${v.default}"`
          : `default: ${display(v.default)}`,
      );
    if (comments.length > 0) out += ` // ${comments.join(' ')}`;
  }
  return out;
}

function objectToTypescript(s: Schema, indent: string): string {
  let out = '';
  if (typeof s.description === 'string') out += `${indent}// ${s.description}\n`;
  out += '{\n';
  const props = isSchema(s.properties) ? s.properties : {};
  const required = new Set(Array.isArray(s.required) ? s.required.filter((r) => typeof r === 'string') : []);
  for (const [key, val] of Object.entries(props)) {
    const v = isSchema(val) ? val : {};
    const opt = required.has(key) ? '' : '?';
    if (typeof v.title === 'string') out += `${indent}// ${v.title}\n${indent}//\n`;
    if (v.oneOf === undefined && typeof v.description === 'string') out += `${indent}// ${v.description}\n`;
    if (Array.isArray(v.examples) && v.examples.length > 0) {
      out += `${indent}// Examples:\n`;
      for (const ex of v.examples) if (typeof ex === 'string') out += `${indent}// - "${ex}"\n`;
    }
    if (Array.isArray(v.oneOf)) {
      const propDesc = typeof v.description === 'string' ? v.description : null;
      const first: unknown = v.oneOf[0];
      const skip = propDesc !== null && isSchema(first) && first.description === propDesc;
      const above = !skip && propDesc !== null;
      if (above) out += `${indent}// ${propDesc}\n`;
      const d = defaultComment(v, true);
      if (d !== null) out += `${indent}// ${d}\n`;
      out += `${indent}${key}${opt}:\n`;
      v.oneOf.forEach((variant: unknown, i: number) => {
        out += `${indent} | ${withNullable(variant, schemaToTypescript(variant, `${indent}   `))}`;
        const comments: string[] = [];
        if (isSchema(variant)) {
          if (
            !(i === 0 && above) &&
            typeof variant.description === 'string' &&
            variant.description !== propDesc
          )
            comments.push(variant.description);
          const vd = defaultComment(variant, true);
          if (vd !== null) comments.push(vd);
        }
        if (comments.length > 0) out += ` // ${comments.join(' ')}`;
        out += '\n';
      });
      out += `${indent},\n`;
      continue;
    }
    out += `${indent}${key}${opt}: ${withNullable(v, schemaToTypescript(v, `${indent}    `))},`;
    const d = defaultComment(v, true);
    if (d !== null) out += ` // ${d}`;
    out += '\n';
  }
  return `${out}${indent}}`;
}

export function schemaToTypescript(schema: unknown, indent: string): string {
  if (!isSchema(schema)) return 'any';
  if (Array.isArray(schema.oneOf)) return oneOfInline(schema.oneOf, indent);
  if (Array.isArray(schema.type)) {
    const types = schema.type
      .filter((t): t is string => typeof t === 'string')
      .map((t) => (t === 'integer' ? 'number' : t));
    if (types.length > 0) return types.join(' | ');
  }
  switch (schema.type) {
    case 'object':
      return objectToTypescript(schema, indent);
    case 'string': {
      const enums = Array.isArray(schema.enum)
        ? schema.enum.filter((e) => typeof e === 'string').map((e) => `"${e}"`)
        : [];
      return enums.length > 0 ? enums.join(' | ') : 'string';
    }
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array':
      return 'items' in schema ? `${schemaToTypescript(schema.items, indent)}[]` : 'Array<any>';
    default:
      return 'any';
  }
}
