// The OpenAPI schemas of delivery URLs' resources: signing keys, presets, origins (merged into
// COMPONENT_SCHEMAS by schemas.ts). The objects are built by src/delivery/.
import { FITS, GRAVITIES, MAX_RENDER_SIDE } from '../delivery/transform.js';

type JsonSchema = Record<string, unknown>;

const timestamp = (description: string) => ({ type: 'string', format: 'date-time', description }) as const;
const keyId = { type: 'string', pattern: '^sk_[A-Za-z0-9_-]+$', description: 'The public id of the key, the first segment after /r/.' } as const;
const name = (what: string) =>
  ({ type: 'string', pattern: '^[a-z0-9-]{1,32}$', description: `The ${what}'s name: a-z, 0-9 and -, 1–32 characters.` }) as const;

/** What a transform is, for the preset schemas and the /r/ route's description. */
export const TRANSFORM_GRAMMAR =
  '`-` (the source as it is, re-encoded only where `f` asks) or `name:value` pairs joined by `,` in any order, each name once: ' +
  `\`w\`, \`h\` (px, 1–${MAX_RENDER_SIDE}), \`fit\` (${FITS.join(', ')}; default inside), \`g\` (gravity: ${GRAVITIES.join(', ')}; ` +
  '`attention`, `entropy` and `face` choose the crop, so they need `fit:cover`; `face` centres it on the faces found, else as `attention`), `dpr` (1–4, up to 3 decimals; multiplies `w` and `h`), ' +
  '`f` (jpeg, png, webp, avif, gif, jxl, or auto; `jpg` is taken as jpeg), `q` (1–100), ' +
  '`bg` (6 or 8 hex digits: letterbox and flattening colour), `rot` (90, 180, 270), `flip` (h, v, hv), `blur` (sigma 0.3–1000), ' +
  "`sharpen` (sigma 0.01–10), `page` (a PDF source's page, from 1, default 1: rasterised at the size `w`/`h` ask, 1024 px wide without them; past the last page, or on another source, 400 naming it), " +
  '`p` (a preset, expanded where it stands: pairs after it override its own, pairs before it are overridden by it). ' +
  `Rotation and flips apply first, then the resize, then blur and sharpen. A render is at most ${MAX_RENDER_SIDE} px a side (\`w\`, \`h\` after \`dpr\`, ` +
  "and the output of `-` or of a `fit` that enlarges: 400 naming `w` or `h`) and within the plan's pixel limits (422 IMAGE_TOO_LARGE). " +
  'Unknown names and bad values are 400 VALIDATION_ERROR naming the pair.';

export const DELIVERY_SCHEMAS: Record<string, JsonSchema> = {
  SigningKey: {
    type: 'object',
    required: ['keyId', 'createdAt'],
    additionalProperties: false,
    properties: { keyId, createdAt: timestamp('When it was created.') },
    examples: [{ keyId: 'sk_3Jq8Vn2Lw5Xc7Rb1Tz4Md9Kp', createdAt: '2026-05-04T09:30:00.000Z' }],
  },
  CreatedSigningKey: {
    type: 'object',
    required: ['keyId', 'secret', 'createdAt'],
    additionalProperties: false,
    properties: {
      keyId,
      secret: {
        type: 'string',
        pattern: '^[A-Za-z0-9_-]{43}$',
        description:
          '32 random bytes, base64url: shown this once. Sign with HMAC-SHA256 keyed by this text as given (its UTF-8 bytes), over `{transform}/{source}`.',
      },
      createdAt: timestamp('When it was created.'),
    },
    examples: [
      { keyId: 'sk_3Jq8Vn2Lw5Xc7Rb1Tz4Md9Kp', secret: 'q2dR8vX1bN7mK4pL0sT9wY3zC6fH5jG2aE8uI1oQ4rM', createdAt: '2026-05-04T09:30:00.000Z' },
    ],
  },
  SigningKeyList: {
    type: 'object',
    required: ['signingKeys'],
    additionalProperties: false,
    properties: { signingKeys: { type: 'array', items: { $ref: '#/components/schemas/SigningKey' }, description: 'Newest first; no secrets.' } },
    examples: [{ signingKeys: [{ keyId: 'sk_3Jq8Vn2Lw5Xc7Rb1Tz4Md9Kp', createdAt: '2026-05-04T09:30:00.000Z' }] }],
  },
  CreatePresetRequest: {
    type: 'object',
    required: ['name', 'transform'],
    additionalProperties: false,
    properties: {
      name: name('preset'),
      transform: { type: 'string', minLength: 1, maxLength: 1024, description: `The transform, as in a URL but without \`p\`: ${TRANSFORM_GRAMMAR}` },
      public: { type: 'boolean', description: "Usable unsigned (`_` as the signature) when the URL's whole transform is `p:{name}`. Default false." },
    },
    examples: [{ name: 'thumb', transform: 'w:320,h:320,fit:cover,f:auto', public: true }],
  },
  UpdatePresetRequest: {
    type: 'object',
    required: ['transform'],
    additionalProperties: false,
    properties: {
      transform: { type: 'string', minLength: 1, maxLength: 1024, description: 'The new transform (without `p`).' },
      public: { type: 'boolean', description: 'Unchanged when absent.' },
    },
    examples: [{ transform: 'w:400,h:400,fit:cover,f:auto' }],
  },
  Preset: {
    type: 'object',
    required: ['name', 'transform', 'public', 'createdAt', 'updatedAt'],
    additionalProperties: false,
    properties: {
      name: name('preset'),
      transform: { type: 'string', description: 'The transform, normalised (pairs in a fixed order, hex in lower case).' },
      public: { type: 'boolean', description: 'Usable unsigned as `p:{name}`.' },
      createdAt: timestamp('When it was created.'),
      updatedAt: timestamp('When its transform last changed.'),
    },
    examples: [
      {
        name: 'thumb',
        transform: 'w:320,h:320,fit:cover,f:auto',
        public: true,
        createdAt: '2026-05-04T09:30:00.000Z',
        updatedAt: '2026-05-04T09:30:00.000Z',
      },
    ],
  },
  PresetList: {
    type: 'object',
    required: ['presets'],
    additionalProperties: false,
    properties: { presets: { type: 'array', items: { $ref: '#/components/schemas/Preset' }, description: 'By name.' } },
    examples: [
      {
        presets: [
          {
            name: 'thumb',
            transform: 'w:320,h:320,fit:cover,f:auto',
            public: true,
            createdAt: '2026-05-04T09:30:00.000Z',
            updatedAt: '2026-05-04T09:30:00.000Z',
          },
        ],
      },
    ],
  },
  CreateOriginRequest: {
    type: 'object',
    required: ['name', 'baseUrl'],
    additionalProperties: false,
    properties: {
      name: name('origin'),
      baseUrl: {
        type: 'string',
        minLength: 1,
        maxLength: 2048,
        description:
          'An http or https URL without credentials, query or fragment; `o/{name}/{path}` fetches `baseUrl/path`. Its host must be (and resolve to) a public ' +
          'address unless the operator sets ORIGIN_ALLOW_PRIVATE_NETWORKS=1 (400 VALIDATION_ERROR naming `baseUrl`); each fetch checks the address it connects to again.',
      },
    },
    examples: [{ name: 'shop', baseUrl: 'https://assets.example.com/images' }],
  },
  Origin: {
    type: 'object',
    required: ['name', 'baseUrl', 'createdAt'],
    additionalProperties: false,
    properties: { name: name('origin'), baseUrl: { type: 'string', format: 'uri' }, createdAt: timestamp('When it was created.') },
    examples: [{ name: 'shop', baseUrl: 'https://assets.example.com/images', createdAt: '2026-05-04T09:30:00.000Z' }],
  },
  OriginList: {
    type: 'object',
    required: ['origins', 'limit'],
    additionalProperties: false,
    properties: {
      origins: { type: 'array', items: { $ref: '#/components/schemas/Origin' }, description: 'By name.' },
      limit: { type: 'integer', minimum: 0, description: "The plan's `origins` limit." },
    },
    examples: [{ origins: [{ name: 'shop', baseUrl: 'https://assets.example.com/images', createdAt: '2026-05-04T09:30:00.000Z' }], limit: 5 }],
  },
};
