/** A command line the binary cannot run: it prints the message and the usage, and exits 64. */
export class UsageError extends Error {}

/** The values of the non-option arguments after a command's name (parseArgs wants no holes). */
export const present = (args: readonly (string | undefined)[]): string[] => args.filter((a): a is string => a !== undefined);
