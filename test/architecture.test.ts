// The layer rules of docs/architecture.md, checked on the source so that they stay true:
//
//   1. http/ is the top layer. No module outside src/http/ imports from it; the one exception is
//      the serve command (src/commands/serve.ts), which starts the HTTP server (src/http/app.ts).
//   2. SQL lives with the data. Query-builder calls (selectFrom, updateTable, insertInto,
//      deleteFrom, joins) and Kysely's `sql` tag appear only in the data-owning modules of
//      DATA_OWNERS; each writes only the tables it owns and reads only those or the ones it
//      declares. Routes, the worker, the command line call the owners' named functions.
//   3. No import cycles among the files of src/ (type-only imports count: they tie two
//      modules together as tightly), nor among its folders: imaging/ → programs/ and
//      programs/ → imaging/ through different files is a circle too (a file at the top of src/
//      counts as a folder of its own).
//
// A failure names the file, the line and the rule broken. The rules are also run on small
// made-up trees below, so that each is known to catch what it is meant to.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Owner {
  /** The tables it writes (and reads). */
  owns: readonly string[];
  /** Other modules' tables it reads, each with the reason. */
  reads?: Readonly<Record<string, string>>;
}

/** The data-owning modules (a directory, or a single file) and their tables. */
const DATA_OWNERS: Readonly<Record<string, Owner>> = {
  'src/accounts/': {
    owns: ['accounts', 'api_keys', 'usage_counters', 'sessions', 'auth_throttle', 'setup_tokens', 'invites', 'rate_limits'],
    reads: { tasks: 'the plan limits queued and running tasks (quota.checkQueuedTasks)' },
  },
  'src/files/': {
    owns: ['files', 'uploads', 'file_info'],
    reads: { task_inputs: 'a file an unfinished task reads is kept', tasks: 'a file an unfinished task reads is kept' },
  },
  // The task table is the queue (ARCHITECTURE.md): tasks/ writes a task's birth and its cancel,
  // queue/ its runs (claim, heartbeat, complete, fail, release, reap).
  'src/tasks/': {
    owns: ['tasks', 'task_inputs', 'batches'],
    reads: { files: "a task's input files, and a batch's outputs for its ZIP" },
  },
  'src/queue/': {
    owns: ['tasks', 'account_lanes'],
    reads: { accounts: 'the operator sees who failed' },
  },
  'src/db/': { owns: ['idempotency_keys'] },
  'src/maintenance.ts': { owns: ['periodic_runs'] },
  // Endpoints and their deliveries (a queue of its own, like tasks).
  'src/webhooks/': { owns: ['webhooks', 'webhook_deliveries'] },
  // Delivery URLs: signing keys, presets, origins and their fetched objects, the render cache's index.
  'src/delivery/': {
    owns: ['signing_keys', 'presets', 'origins', 'origin_objects', 'render_cache'],
    reads: { accounts: "a signing key's account: its plan and whether it is disabled" },
  },
};

/** The files that may name a table through a variable instead of a literal (see sqlPlacement). */
const TABLES_BY_VARIABLE = ['src/db/database.ts', 'src/db/dump.ts'];

/**
 * Migrations change the shape of every table and, when a shape changes, move its data: they
 * may touch any table (and run before any owner's code does).
 */
const MIGRATIONS = 'src/db/migrations.ts';

/** `imgapi serve` starts the HTTP server: the one import of http/ from outside it. */
const HTTP_ENTRY = { from: 'src/commands/serve.ts', to: 'src/http/app.ts' };

/** Views (migration 0014, SQLite) count as the table they show: its owner writes through them. */
const VIEWS: Readonly<Record<string, string>> = { charged_files: 'files', task_completions: 'tasks', queued_tasks: 'tasks' };

/** The names a file gives its statements' CTEs (`.with('name', …)`, `cte('name')`): no table's. */
const cteNames = (text: string): Set<string> => new Set([...text.matchAll(/(?:\.with|\bcte)\(\s*'(\w+)'/g)].map((m) => m[1]!));

const WRITES = new Set(['insertInto', 'updateTable', 'deleteFrom', 'replaceInto', 'mergeInto']);
const READS = new Set(['selectFrom', 'innerJoin', 'leftJoin', 'rightJoin', 'fullJoin', 'innerJoinLateral', 'leftJoinLateral']);
/** Imports that talk to the database directly. */
const DRIVERS = new Set(['pg', 'better-sqlite3']);

interface SourceFile {
  /** Relative to the repository, with forward slashes: src/files/files.ts. */
  path: string;
  text: string;
}

function readSources(): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const relative = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(relative);
      else if (entry.name.endsWith('.ts')) files.push({ path: relative, text: fs.readFileSync(path.join(ROOT, relative), 'utf8') });
    }
  };
  walk('src');
  return files;
}

/** The tables of `interface DB` in src/db/schema.ts. */
function schemaTables(): string[] {
  const text = fs.readFileSync(path.join(ROOT, 'src/db/schema.ts'), 'utf8');
  const body = /export interface DB \{([^}]*)\}/.exec(text)?.[1] ?? '';
  return [...body.matchAll(/^\s*(\w+):/gm)].map((m) => m[1]!);
}

interface Import {
  /** The imported file, resolved (src/http/app.ts), or the package name. */
  target: string;
  line: number;
  typeOnly: boolean;
  /** The names imported as values ('*' for a namespace, 'default'). */
  values: string[];
}

interface Parsed {
  file: SourceFile;
  source: ts.SourceFile;
  imports: Import[];
}

function parse(file: SourceFile): Parsed {
  const source = ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, true);
  const imports: Import[] = [];
  const line = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const resolve = (specifier: string) =>
    specifier.startsWith('.') ? path.posix.normalize(path.posix.join(path.posix.dirname(file.path), specifier)).replace(/\.js$/, '.ts') : specifier;
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = ts.isImportDeclaration(node) ? node.importClause : undefined;
      const typeOnly = ts.isImportDeclaration(node) ? Boolean(clause?.isTypeOnly) : node.isTypeOnly;
      const values: string[] = [];
      if (clause && !clause.isTypeOnly) {
        if (clause.name) values.push('default');
        const bindings = clause.namedBindings;
        if (bindings && ts.isNamespaceImport(bindings)) values.push('*');
        if (bindings && ts.isNamedImports(bindings))
          for (const element of bindings.elements) if (!element.isTypeOnly) values.push((element.propertyName ?? element.name).text);
      }
      imports.push({ target: resolve(node.moduleSpecifier.text), line: line(node), typeOnly, values });
    }
    if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      imports.push({ target: resolve(node.arguments[0].text), line: line(node), typeOnly: false, values: ['*'] });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { file, source, imports };
}

const ownerOf = (filePath: string): [string, Owner] | undefined =>
  Object.entries(DATA_OWNERS).find(([prefix]) => (prefix.endsWith('/') ? filePath.startsWith(prefix) : filePath === prefix));

/** Rule 1: http/ is imported from outside only by the command line, and only for app.ts. */
function httpImports(files: Parsed[]): string[] {
  const problems: string[] = [];
  for (const { file, imports } of files) {
    if (file.path.startsWith('src/http/')) continue;
    for (const imported of imports) {
      if (!imported.target.startsWith('src/http/')) continue;
      if (file.path === HTTP_ENTRY.from && imported.target === HTTP_ENTRY.to) continue;
      problems.push(
        `${file.path}:${imported.line} imports ${imported.target}: only src/http/ may import from src/http/ ` +
          `(besides ${HTTP_ENTRY.from} starting ${HTTP_ENTRY.to}); move what it needs down to the layer that owns it`,
      );
    }
  }
  return problems;
}

/** Rule 2: query builders and the sql tag only in the data owners, on the tables each owns or reads. */
function sqlPlacement(files: Parsed[]): string[] {
  const problems: string[] = [];
  for (const { file, source, imports } of files) {
    const owner = ownerOf(file.path);
    const where = (node: ts.Node) => `${file.path}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`;
    const ctes = cteNames(file.text);
    const outside = (what: string) =>
      `${what} outside the data-owning modules (DATA_OWNERS in test/architecture.test.ts): call a named function of the module that owns the table`;
    for (const imported of imports) {
      if (owner) break;
      if (DRIVERS.has(imported.target) && !imported.typeOnly)
        problems.push(`${file.path}:${imported.line} imports the database driver ${imported.target}: ${outside('a driver')}`);
      if (imported.target === 'kysely' && imported.values.includes('sql'))
        problems.push(`${file.path}:${imported.line} imports kysely's sql: ${outside('SQL')}`);
    }
    const visit = (node: ts.Node) => {
      if (ts.isTaggedTemplateExpression(node) && ts.isIdentifier(node.tag) && node.tag.text === 'sql' && !owner) {
        problems.push(`${where(node)} writes sql\`…\`: ${outside('SQL')}`);
      }
      if (ts.isCallExpression(node)) {
        const callee = node.expression;
        const name = ts.isPropertyAccessExpression(callee) ? callee.name.text : ts.isIdentifier(callee) ? callee.text : undefined;
        if (name && (WRITES.has(name) || READS.has(name))) {
          const write = WRITES.has(name);
          const tables = tableNames(node.arguments[0]);
          if (!owner) {
            problems.push(`${where(node)} calls ${name}(${tables?.join(', ') ?? '…'}): ${outside('a query')}`);
          } else if (tables === undefined) {
            // Only the database adapter names tables through a variable (lockRow's LockableTable),
            // and the whole-database copier (src/db/dump.ts: backup, restore, copy-to), whose
            // TABLES must list every table of the schema.
            if (!TABLES_BY_VARIABLE.includes(file.path))
              problems.push(`${where(node)} calls ${name} with a table that is not a literal: name the table, so its owner can be checked`);
          } else if (file.path !== MIGRATIONS) {
            const [prefix, { owns, reads = {} }] = owner;
            for (const named of tables) {
              if (ctes.has(named)) continue;
              const table = VIEWS[named] ?? named;
              if (owns.includes(table)) continue;
              if (write)
                problems.push(
                  `${where(node)} writes ${table} (${name}), which ${prefix} does not own: a table is written only by its owner (DATA_OWNERS)`,
                );
              else if (!(table in reads))
                problems.push(`${where(node)} reads ${table} (${name}), which ${prefix} neither owns nor declares it reads (DATA_OWNERS)`);
            }
          }
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return problems;
}

/** The table names a builder call's first argument gives ('usage_counters as u' → usage_counters); undefined if not literal. */
function tableNames(argument: ts.Expression | undefined): string[] | undefined {
  if (!argument) return undefined;
  if (ts.isStringLiteralLike(argument)) return [argument.text.trim().split(/\s+/)[0]!];
  if (ts.isArrayLiteralExpression(argument)) {
    const names = argument.elements.map((element) => (ts.isStringLiteralLike(element) ? element.text.trim().split(/\s+/)[0]! : undefined));
    return names.every((name) => name !== undefined) ? (names as string[]) : undefined;
  }
  return undefined;
}

/** Rule 3: every import cycle among the files, as a path a → b → … → a. */
function importCycles(files: Parsed[]): string[] {
  const known = new Set(files.map((f) => f.file.path));
  const edges = new Map(files.map((f) => [f.file.path, [...new Set(f.imports.map((i) => i.target).filter((t) => known.has(t)))]]));
  const problems: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of edges.get(node) ?? []) {
      if (state.get(next) === 'open') {
        const cycle = [...stack.slice(stack.indexOf(next)), next];
        problems.push(
          `import cycle ${cycle.join(' → ')}: modules must not import each other in a circle; move what both need into a module both import`,
        );
      } else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of [...edges.keys()].sort()) if (!state.has(node)) visit(node);
  return problems;
}

/** The folder a file belongs to for rule 3: src/imaging/decoders/heic.ts → src/imaging; a top-level file is its own. */
const folderOf = (file: string): string => {
  const parts = file.split('/');
  return parts.length > 2 ? parts.slice(0, 2).join('/') : file;
};

/**
 * Rule 3, between folders: every group of folders that import each other in a circle (a strongly
 * connected component of the folder graph), each of its edges named by one import that makes it.
 */
function folderCycles(files: Parsed[]): string[] {
  const known = new Set(files.map((f) => f.file.path));
  /** from folder → to folder → the first import (file:line) that makes the edge. */
  const edges = new Map<string, Map<string, string>>();
  for (const { file, imports } of files) {
    const from = folderOf(file.path);
    for (const imported of imports) {
      if (!known.has(imported.target)) continue;
      const to = folderOf(imported.target);
      if (to === from) continue;
      const out = edges.get(from) ?? new Map<string, string>();
      edges.set(from, out);
      if (!out.has(to)) out.set(to, `${file.path}:${imported.line} imports ${imported.target}`);
    }
  }
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (node: string) => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of [...(edges.get(node)?.keys() ?? [])].sort()) {
      if (!index.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const node of [...edges.keys()].sort()) if (!index.has(node)) connect(node);
  return components.map((component) => {
    const inside = component.flatMap((from) => [...(edges.get(from) ?? [])].filter(([to]) => component.includes(to)).map(([, why]) => `\n  ${why}`));
    return (
      `folders ${component.join(', ')} import each other in a circle: move what both need into a folder both import, ` +
      `or pass it in as a callback${inside.join('')}`
    );
  });
}

const check = (problems: string[]) => assert.ok(problems.length === 0, `\n${problems.join('\n')}\n`);
const tree = (files: Record<string, string>): Parsed[] => Object.entries(files).map(([p, text]) => parse({ path: p, text }));

describe('architecture', () => {
  const files = readSources().map(parse);

  it('no module outside src/http/ imports from it, but the serve command starting the server', () => {
    check(httpImports(files));
  });

  it('SQL only in the data-owning modules, each on the tables it owns or declares it reads', () => {
    check(sqlPlacement(files));
  });

  it('every table has an owner, and every owned table exists', () => {
    const tables = schemaTables();
    assert.ok(tables.length >= 10, `read the tables of src/db/schema.ts: ${tables.join(', ')}`);
    const owned = new Set(Object.values(DATA_OWNERS).flatMap((o) => o.owns));
    const declared = new Set(Object.values(DATA_OWNERS).flatMap((o) => [...o.owns, ...Object.keys(o.reads ?? {})]));
    check([
      ...tables.filter((t) => !owned.has(t)).map((t) => `table ${t} (src/db/schema.ts) has no owner in DATA_OWNERS: say which module writes it`),
      ...[...declared].filter((t) => !tables.includes(t)).map((t) => `DATA_OWNERS names ${t}, which src/db/schema.ts does not have`),
    ]);
  });

  it('no import cycles among the files of src/', () => {
    check(importCycles(files));
  });

  it('no import cycles among the folders of src/', () => {
    check(folderCycles(files));
  });

  describe('the rules catch what they are meant to', () => {
    it('an import of http/ from below it, and any of http/ but app.ts from the serve command', () => {
      const problems = httpImports(
        tree({
          'src/files/files.ts': "import { olderThan } from '../http/pagination.js';",
          'src/commands/serve.ts': "import { buildApp } from '../http/app.js';\nimport { apiKeyAuth } from '../http/auth.js';",
          'src/http/routes/files.ts': "import { ref } from '../schemas.js';",
        }),
      );
      assert.equal(problems.length, 2, problems.join('\n'));
      assert.match(problems[0]!, /^src\/files\/files\.ts:1 imports src\/http\/pagination\.ts: only src\/http\/ may import/);
      assert.match(problems[1]!, /^src\/commands\/serve\.ts:2 imports src\/http\/auth\.ts/);
    });

    it("a query in a route, the worker or the command line; a write to another module's table; an undeclared read", () => {
      const problems = sqlPlacement(
        tree({
          'src/http/routes/admin.ts': "const rows = await database.db.selectFrom('tasks').selectAll().execute();",
          'src/worker/runner.ts': "import { sql } from 'kysely';\nawait sql`select 1`.execute(db);",
          'src/main.ts': "await database.db.updateTable('accounts').set({ plan }).execute();",
          'src/queue/queue.ts':
            "await tx.insertInto('files').values(rows).execute();\nawait db.selectFrom('tasks').innerJoin('accounts', 'a', 'b').execute();",
          'src/tasks/tasks.ts':
            "await db.selectFrom('uploads').selectAll().execute();\nawait db.with('picked', q).selectFrom('picked').execute();\nawait tx.insertInto('charged_files').execute();",
          'src/files/files.ts':
            "await db.selectFrom('task_inputs').innerJoin('tasks', 'x', 'y').execute();\nawait tx.updateTable('files').execute();",
        }),
      );
      const lines = problems.map((p) => p.slice(0, p.indexOf(' ')));
      assert.deepEqual(
        lines,
        [
          'src/http/routes/admin.ts:1',
          'src/worker/runner.ts:1',
          'src/worker/runner.ts:2',
          'src/main.ts:1',
          'src/queue/queue.ts:1',
          'src/tasks/tasks.ts:1',
          'src/tasks/tasks.ts:3',
        ],
        problems.join('\n'),
      );
      assert.match(problems[0]!, /calls selectFrom\(tasks\): a query outside the data-owning modules/);
      assert.match(problems[4]!, /writes files \(insertInto\), which src\/queue\/ does not own/);
      assert.match(problems[5]!, /reads uploads \(selectFrom\), which src\/tasks\/ neither owns nor declares it reads/);
    });

    it('an import cycle, type-only imports included', () => {
      const problems = importCycles(
        tree({
          'src/a.ts': "import { b } from './b.js';",
          'src/b.ts': "import type { C } from './c/c.js';",
          'src/c/c.ts': "import { a } from '../a.js';",
          'src/d.ts': "import { a } from './a.js';",
        }),
      );
      assert.deepEqual(
        problems.map((p) => p.slice(0, p.indexOf(':'))),
        ['import cycle src/a.ts → src/b.ts → src/c/c.ts → src/a.ts'],
      );
    });

    it('a circle between folders through different files, and not a chain or a top-level file', () => {
      const problems = folderCycles(
        tree({
          'src/imaging/source.ts': "import { fileSource } from '../documents/container.js';",
          'src/documents/svg-parts.ts': "import { safeSvg } from '../imaging/svg.js';",
          'src/imaging/svg.ts': "import type { Config } from '../config.js';",
          'src/documents/container.ts': "import type { Config } from '../config.js';",
          'src/config.ts': '',
          'src/services.ts': "import { inspect } from './imaging/source.js';",
          'src/worker/worker.ts': "import { inspect } from '../imaging/source.js';",
        }),
      );
      assert.equal(problems.length, 1, problems.join('\n'));
      assert.match(problems[0]!, /^folders src\/documents, src\/imaging import each other in a circle/);
      assert.match(problems[0]!, /src\/imaging\/source\.ts:1 imports src\/documents\/container\.ts/);
      assert.match(problems[0]!, /src\/documents\/svg-parts\.ts:1 imports src\/imaging\/svg\.ts/);
    });
  });
});
