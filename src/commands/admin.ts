// The operator's account commands: users (create, set-plan, set-password) and keys (create,
// list, revoke), run on the service's own database.
import { parseArgs } from 'node:util';
import { checkPlan, createAccount, createApiKey, findAccountByEmail, listApiKeys, revokeApiKey, setPassword, setPlan } from '../accounts/accounts.js';
import { deleteSessionsOf } from '../accounts/sessions.js';
import { iso } from '../clock.js';
import { loadConfig } from '../config.js';
import { createServices } from '../services.js';
import { UsageError } from './usage.js';

/** `imgapi users …` and `imgapi keys …`: `group` is users or keys, `args` its subcommand and options. */
export async function admin(group: string, [command, ...args]: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      email: { type: 'string' },
      plan: { type: 'string' },
      admin: { type: 'boolean', default: false },
      password: { type: 'string' },
      name: { type: 'string' },
      id: { type: 'string' },
    },
  });
  const need = (name: keyof typeof values): string => {
    const value = values[name];
    if (typeof value !== 'string' || !value) throw new UsageError(`${group} ${command} needs --${name}`);
    return value;
  };
  const services = await createServices(loadConfig(), {});
  try {
    const { database, clock } = services;
    const account = async () => {
      const found = await findAccountByEmail(database, need('email'));
      if (!found) throw new UsageError(`no account for ${values.email}`);
      return found;
    };
    const action = `${group} ${command ?? ''}`.trim();
    switch (action) {
      case 'users create': {
        const created = await createAccount(database, clock, {
          email: need('email'),
          plan: checkPlan(need('plan')),
          admin: values.admin,
          password: values.password,
        });
        console.error(`created ${created.plan} account ${created.email} (${created.id})${created.is_admin ? ', admin' : ''}`);
        return 0;
      }
      case 'users set-plan': {
        const found = await account();
        const plan = checkPlan(need('plan'));
        await setPlan(database, found.id, plan);
        services.events.changed('accounts');
        console.error(`${found.email}: plan ${found.plan} → ${plan}`);
        return 0;
      }
      case 'users set-password': {
        const found = await account();
        const password = need('password');
        if (password.length < 8) throw new UsageError('--password needs at least 8 characters');
        await setPassword(database, found.id, password);
        await deleteSessionsOf(database, found.id);
        console.error(`${found.email}: password set; dashboard sessions ended`);
        return 0;
      }
      case 'keys create': {
        const created = await createApiKey(database, clock, (await account()).id, need('name'));
        // The key alone on stdout, so `KEY=$(imgapi keys create …)` works.
        process.stdout.write(`${created.key}\n`);
        console.error(`created key ${created.prefix}… (${created.id}); it is shown only once`);
        return 0;
      }
      case 'keys list': {
        for (const key of await listApiKeys(database, (await account()).id)) {
          const state = key.revoked_at ? `revoked ${iso(key.revoked_at)}` : `last used ${key.last_used_at ? iso(key.last_used_at) : 'never'}`;
          console.log(`${key.id}\t${key.prefix}…\t${key.name}\tcreated ${iso(key.created_at)}\t${state}`);
        }
        return 0;
      }
      case 'keys revoke': {
        const revoked = await revokeApiKey(database, clock, (await account()).id, need('id'));
        services.events.changed('accounts');
        if (!revoked) throw new UsageError(`no active key ${values.id} for ${values.email}`);
        console.error(`revoked ${values.id}`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${action}"`);
    }
  } finally {
    await services.close();
  }
}
