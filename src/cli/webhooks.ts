// `imgapi webhooks …`: manage webhook endpoints through the SDK — list, create (printing the
// secret, shown once), delete, recent deliveries, a test event, a resend.
import type { Imgapi, WebhookDelivery } from '../../sdk/node.js';
import { connect, retryLine, UsageError, type ClientIo, type CommonOptions } from './common.js';
import { table } from './progress.js';
import { json, printable } from './terminal.js';

export const WEBHOOKS_USAGE = `  webhooks list                   the account's endpoints
  webhooks create <url> [--events task.completed,…] [--description text]
                                  prints the endpoint and its secret (shown once)
  webhooks delete <webhookId>
  webhooks deliveries <webhookId> [--limit N]
                                  recent deliveries: event, status, attempts, last answer
  webhooks test <webhookId>       queues a webhook.test event
  webhooks resend <webhookId> <deliveryId>`;

/** Positional arguments and `--name value` options of a subcommand; unknown options are a usage error. */
function parse(rest: string[], allowed: readonly string[]): { positionals: string[]; values: Map<string, string> } {
  const positionals: string[] = [];
  const values = new Map<string, string>();
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const [name, inline] = arg.includes('=') ? [arg.slice(2, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg.slice(2), undefined];
    if (!allowed.includes(name)) throw new UsageError(`unknown option --${name}`);
    const value = inline ?? rest[++i];
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    values.set(name, value);
  }
  return { positionals, values };
}

function exactly(positionals: string[], count: number, usage: string): string[] {
  if (positionals.length !== count) throw new UsageError(`usage: imgapi ${usage}`);
  return positionals;
}

const print = (io: ClientIo, value: unknown) => io.stdout.write(`${json(value)}\n`);

/** A queued delivery: JSON with --json, else one line (its id, event and status). */
function printDelivery(io: ClientIo, options: CommonOptions, delivery: WebhookDelivery): void {
  if (options.json) print(io, delivery);
  else io.stdout.write(`${printable(`${delivery.deliveryId} ${delivery.event} ${delivery.status} (event ${delivery.eventId})`)}\n`);
}

export async function webhooksCommand(options: CommonOptions, io: ClientIo): Promise<number> {
  const [sub, ...rest] = options.rest;
  const client: () => Imgapi = () => connect(options, options.json ? undefined : (event) => io.stderr.write(`${retryLine(event)}\n`));
  switch (sub) {
    case 'list': {
      exactly(parse(rest, []).positionals, 0, 'webhooks list');
      const { webhooks, limit } = await client().webhooks();
      if (options.json) print(io, { webhooks, limit });
      else
        io.stdout.write(
          `${table(
            ['WEBHOOK', 'URL', 'EVENTS', 'CREATED'],
            webhooks.map((w) => [w.webhookId, w.url, w.events.join(','), w.createdAt]),
            ['left', 'left', 'left', 'left'],
          )}\n${webhooks.length} of ${limit} endpoints\n`,
        );
      return 0;
    }
    case 'create': {
      const { positionals, values } = parse(rest, ['events', 'description']);
      const [url] = exactly(positionals, 1, 'webhooks create <url> [--events a,b] [--description text]');
      const events = values
        .get('events')
        ?.split(',')
        .map((e) => e.trim())
        .filter(Boolean);
      const created = await client().createWebhook({
        url: url!,
        ...(events ? { events: events as never } : {}),
        ...(values.has('description') ? { description: values.get('description')! } : {}),
      });
      if (options.json) print(io, created);
      else
        io.stdout.write(
          `${printable(`${created.webhookId} ${created.url} (${created.events.join(', ')})`)}\nsecret (shown once, keep it): ${printable(created.secret)}\n`,
        );
      return 0;
    }
    case 'delete': {
      const [webhookId] = exactly(parse(rest, []).positionals, 1, 'webhooks delete <webhookId>');
      await client().deleteWebhook(webhookId!);
      if (options.json) print(io, { webhookId, deleted: true });
      else io.stdout.write(`${printable(webhookId!)} deleted\n`);
      return 0;
    }
    case 'deliveries': {
      const { positionals, values } = parse(rest, ['limit']);
      const [webhookId] = exactly(positionals, 1, 'webhooks deliveries <webhookId> [--limit N]');
      const limit = values.has('limit') ? Number(values.get('limit')) : undefined;
      if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 100))
        throw new UsageError('--limit takes a whole number from 1 to 100');
      const page = await client().webhookDeliveries(webhookId!, { limit });
      if (options.json) print(io, page);
      else
        io.stdout.write(
          `${table(
            ['DELIVERY', 'EVENT', 'STATUS', 'ATTEMPTS', 'LAST', 'MS', 'ERROR', 'CREATED'],
            page.deliveries.map((d) => [
              d.deliveryId,
              d.event,
              d.status,
              String(d.attempts),
              d.statusCode === undefined ? '-' : String(d.statusCode),
              d.durationMs === undefined ? '-' : String(d.durationMs),
              d.error ?? '',
              d.createdAt,
            ]),
            ['left', 'left', 'left', 'right', 'right', 'right', 'left', 'left'],
          )}\n`,
        );
      return 0;
    }
    case 'test': {
      const [webhookId] = exactly(parse(rest, []).positionals, 1, 'webhooks test <webhookId>');
      printDelivery(io, options, await client().testWebhook(webhookId!));
      return 0;
    }
    case 'resend': {
      const [webhookId, deliveryId] = exactly(parse(rest, []).positionals, 2, 'webhooks resend <webhookId> <deliveryId>');
      printDelivery(io, options, await client().resendWebhookDelivery(webhookId!, deliveryId!));
      return 0;
    }
    default:
      throw new UsageError(sub ? `unknown webhooks command "${sub}"` : 'webhooks: say what to do (list, create, delete, deliveries, test, resend)');
  }
}
