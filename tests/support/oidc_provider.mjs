// A real OpenID provider for the tests (tests/oidc_peer.py starts it): `oidc-provider` from npm on 127.0.0.1.
//
// Usage: node oidc_provider.mjs MODULE_URL SETUP.json, MODULE_URL the file URL of the installed package's entry
// module. The setup file gives the signing keys (a private JWK set, so a test can also sign tokens of its own
// with the provider's key), the scopes, the clients (client credentials grant, client_secret_basic) and which
// clients get opaque access tokens (introspected) instead of JWTs. Access tokens are bound by resource
// indicators: a token request names claimcheck's URL as `resource`, which becomes the token's audience.
// Prints `oidc-provider at <issuer>` once it listens; exits when its stdin closes.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

const { default: Provider } = await import(process.argv[2]);
const setup = JSON.parse(readFileSync(process.argv[3], 'utf8'));
const opaque = new Set(setup.opaqueClients ?? []);

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  jwks: setup.jwks,
  scopes: setup.scopes,
  clients: setup.clients.map(({ id, secret, scope }) => ({
    client_id: id,
    client_secret: secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
    ...(scope ? { scope } : {}),
  })),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      getResourceServerInfo: async (_ctx, resource, client) => ({
        scope: setup.scopes.join(' '),
        audience: resource,
        accessTokenTTL: 600,
        accessTokenFormat: opaque.has(client.clientId) ? 'opaque' : 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});
provider.on('server_error', (_ctx, error) => console.error('oidc-provider server_error', error));
server.on('request', provider.callback());

console.log(`oidc-provider at ${issuer}`);
process.stdin.resume();
process.stdin.on('end', () => server.close(() => process.exit(0)));
