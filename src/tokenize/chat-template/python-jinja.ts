// @huggingface/jinja's interpreter made to print and strip values as Python's jinja2 does.
import { Environment, Interpreter } from '@huggingface/jinja';
import { isPythonNumberMarker } from '../../core/python-json.js';
import { pyStrip, pyStrRepr } from '../../core/python-str.js';

/**
 * @huggingface/jinja's Interpreter, made to print and strip as Python's jinja2 does (vLLM renders with it). Any
 * other text than vLLM's changes the prompt's tokens and every block key after them: a silent loss of cache
 * hits. Differences fixed here, against jinja2 3.1.6 (spec/01-unit/tokenize/python-jinja.spec.ts):
 *
 * - `s.strip(chars)`, `lstrip(chars)`, `rstrip(chars)`: the library ignores `chars` and strips JS whitespace
 *   (Qwen3's `content.lstrip('\n')` ate an answer's indentation). No argument strips str.isspace()'s set.
 * - `{{ x }}`, `x | string`, `a ~ b`, `| join`: Python's str(), so `True`, `None`, `['a', 1]`, `{'k': False}`
 *   (the library printed `true` and JSON, dropped `{{ none }}` and threw on `none | string`, `none ~ 'a'`).
 *   `tojson` is untouched: it never goes through these paths.
 * - `| trim` (with an optional chars argument) strips as str.strip does, on str() of any value.
 * - `map('filter', ...)` applies that filter to each item (the library only has `map(attribute=...)`).
 *
 * The library exports neither its value classes nor these methods' types, so this subclass overrides private
 * methods by name and builds values through constructors taken from values the library hands out. Scoped to
 * our renders: nothing of the library is patched globally. If an upgrade renames a method, loading this
 * module throws (see INTERNALS) rather than silently rendering the library's way.
 */

/** A runtime value of the library, told apart by its `type` ("StringValue", "TupleValue", ...). */
interface Value {
  type: string;
  value: unknown;
}

/** The AST nodes read here (the library's parser builds them; only these fields are used). */
interface Node {
  type: string;
  value?: unknown;
}
interface BinaryNode extends Node {
  operator: { value: string };
  left: Node;
  right: Node;
}
interface MemberNode extends Node {
  object: Node;
  property: Node;
  computed: boolean;
}
interface CallNode extends Node {
  callee: Node;
  args: Node[];
}

/** The Interpreter's private methods this class overrides or calls (dist/index.js of @huggingface/jinja 0.5.11). */
interface Internals {
  run(program: unknown): Value;
  evaluate(node: Node, env: Environment): Value;
  evaluateBlock(statements: Node[], env: Environment): Value;
  evaluateBinaryExpression(node: BinaryNode, env: Environment): Value;
  evaluateMemberExpression(node: MemberNode, env: Environment): Value;
  evaluateArguments(args: Node[], env: Environment): [Value[], Map<string, Value>];
  applyFilter(operand: Value, filter: Node, env: Environment): Value;
}

export const INTERNALS = [
  'run',
  'evaluate',
  'evaluateBlock',
  'evaluateBinaryExpression',
  'evaluateMemberExpression',
  'evaluateArguments',
  'applyFilter',
] as const satisfies readonly (keyof Internals)[];

const base = Interpreter.prototype as unknown as Record<string, unknown>;
const missing = INTERNALS.filter((m) => typeof base[m] !== 'function');
if (missing.length > 0)
  throw new Error(
    `@huggingface/jinja has changed: Interpreter lacks ${missing.join(', ')}; python-jinja.ts must be redone`,
  );

// The library's value classes, from values it makes (Environment.set converts JS values).
const probe = new Environment();
const StringValue = probe.set('s', '').constructor as new (value: string) => Value;
const ArrayValue = probe.set('a', []).constructor as new (value: Value[]) => Value;
const FunctionValue = probe.set('f', () => null).constructor as new (
  fn: (args: Value[], env: Environment) => Value,
) => Value;

/** repr(str), except that a number carried in Python's text (core/python-json.ts) prints as that number. */
function pyReprString(s: string): string {
  return isPythonNumberMarker(s) ? s : pyStrRepr(s);
}

const items = (v: Value): Value[] => v.value as Value[];
const entries = (v: Value): [string, Value][] => [...(v.value as Map<string, Value>)];
const reprMap = (v: Value): string =>
  `{${entries(v)
    .map(([k, x]) => `${pyReprString(k)}: ${pyRepr(x)}`)
    .join(', ')}}`;

/** repr(), as Python prints a value inside a list or dict. */
function pyRepr(v: Value): string {
  switch (v.type) {
    case 'StringValue':
      return pyReprString(v.value as string);
    case 'UndefinedValue':
      return 'Undefined';
    default:
      return pyStr(v);
  }
}

/** str(), as jinja2 prints a value (`{{ }}`, `| string`, `~`). Numbers keep the library's text (`1.0`). */
export function pyStr(v: Value): string {
  switch (v.type) {
    case 'StringValue':
      return v.value as string;
    case 'BooleanValue':
      return v.value ? 'True' : 'False';
    case 'NullValue':
      return 'None';
    case 'UndefinedValue':
      return '';
    case 'ArrayValue':
      return `[${items(v).map(pyRepr).join(', ')}]`;
    case 'TupleValue':
      return items(v).length === 1 ? `(${pyRepr(items(v)[0]!)},)` : `(${items(v).map(pyRepr).join(', ')})`;
    case 'ObjectValue':
    case 'KeywordArgumentsValue':
      return reprMap(v);
    case 'NamespaceValue':
      return `<Namespace ${reprMap(v)}>`;
    default:
      return String(v);
  }
}

const isList = (v: Value): boolean => v.type === 'ArrayValue' || v.type === 'TupleValue';

/** A strip method's or trim's chars argument: None (or none given) strips whitespace. */
function charsArg(v: Value | undefined, what: string): string | null {
  if (v === undefined || v.type === 'NullValue') return null;
  if (v.type === 'StringValue') return v.value as string;
  throw new Error(`${what} arg must be None or str, not ${v.type}`);
}

const STRIPS: Record<string, [boolean, boolean]> = {
  strip: [true, true],
  lstrip: [true, false],
  rstrip: [false, true],
};

// Statements that evaluate to None but print nothing; any other None is an expression's, printed `None`.
const SILENT = new Set(['Set', 'Macro', 'Comment']);

// Argument nodes that are not a plain positional argument (map(attribute=...) stays the library's).
const NOT_POSITIONAL = new Set(['KeywordArgumentExpression', 'SpreadExpression', 'KeywordSpreadExpression']);

const Base = Interpreter as unknown as new (env?: Environment) => Internals;

export class PythonInterpreter extends Base {
  override evaluateBlock(statements: Node[], env: Environment): Value {
    let out = '';
    for (const statement of statements) {
      const v = this.evaluate(statement, env);
      if (!(v.type === 'NullValue' && SILENT.has(statement.type))) out += pyStr(v);
    }
    return new StringValue(out);
  }

  override evaluateBinaryExpression(node: BinaryNode, env: Environment): Value {
    if (node.operator.value !== '~') return super.evaluateBinaryExpression(node, env);
    const left = this.evaluate(node.left, env);
    return new StringValue(pyStr(left) + pyStr(this.evaluate(node.right, env)));
  }

  override evaluateMemberExpression(node: MemberNode, env: Environment): Value {
    const name = !node.computed && node.property.type === 'Identifier' ? node.property.value : undefined;
    const sides = typeof name === 'string' ? STRIPS[name] : undefined;
    if (sides === undefined) return super.evaluateMemberExpression(node, env);
    const object = this.evaluate(node.object, env);
    // Not a string: the library's lookup (it evaluates the object again; expressions have no side effects).
    if (object.type !== 'StringValue') return super.evaluateMemberExpression(node, env);
    return new FunctionValue((args) => {
      if (args.length > 1 || args[0]?.type === 'KeywordArgumentsValue')
        throw new Error(`${String(name)}() takes at most 1 positional argument`);
      return new StringValue(pyStrip(object.value as string, charsArg(args[0], String(name)), ...sides));
    });
  }

  override applyFilter(operand: Value, filter: Node, env: Environment): Value {
    const call = filter.type === 'CallExpression' ? (filter as CallNode) : null;
    const name = call === null ? filter.value : call.callee.type === 'Identifier' ? call.callee.value : null;
    const args = (): [Value[], Map<string, Value>] =>
      call === null ? [[], new Map()] : this.evaluateArguments(call.args, env);
    if (name === 'string') return new StringValue(pyStr(operand));
    if (name === 'trim') {
      const [positional, kwargs] = args();
      const chars = charsArg(positional[0] ?? kwargs.get('chars'), 'trim');
      return new StringValue(pyStrip(pyStr(operand), chars, true, true));
    }
    if (name === 'join' && isList(operand)) {
      const [positional, kwargs] = args();
      if (!kwargs.has('attribute')) {
        const sep = positional[0] ?? kwargs.get('d');
        return new StringValue(
          items(operand)
            .map(pyStr)
            .join(sep === undefined ? '' : pyStr(sep)),
        );
      }
    }
    const first = call?.args[0];
    if (name === 'map' && isList(operand) && first !== undefined && !NOT_POSITIONAL.has(first.type)) {
      // map('trim', ...): the named filter with the remaining arguments (still AST nodes), on each item.
      const filterName = this.evaluate(first, env);
      if (filterName.type === 'StringValue') {
        const callee: Node = { type: 'Identifier', value: filterName.value };
        const rest = call!.args.slice(1);
        const each: Node =
          rest.length === 0 ? callee : ({ type: 'CallExpression', callee, args: rest } as CallNode);
        return new ArrayValue(items(operand).map((x) => this.applyFilter(x, each, env)));
      }
    }
    return super.applyFilter(operand, filter, env);
  }
}
