// Loaded on use: `imgapi migrate` brings the schema up to date (opening the services migrates) and exits.
import { loadConfig } from '../config.js';
import { createServices } from '../services.js';

export async function migrate(): Promise<number> {
  const services = await createServices(loadConfig());
  await services.close();
  console.error('migrations are up to date');
  return 0;
}
