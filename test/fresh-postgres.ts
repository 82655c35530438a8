// A throwaway PostgreSQL database, for the test suites and the benchmarks alike.
import crypto from 'node:crypto';
import pg from 'pg';

/** Creates an empty database on the server of `adminUrl`; returns its URL and how to drop it. */
export async function freshPostgres(adminUrl: string, prefix: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}${crypto.randomBytes(6).toString('hex')}`;
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect(); // fails loudly when PostgreSQL is down: nothing skips silently
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await run(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
