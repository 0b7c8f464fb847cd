// A cut of npm's @npmcli/config definitions: the reader must take the
// default of the registry definition, not of its neighbours.
const definitions = {
  prefix: new Definition('prefix', {
    default: 'https://not-the-registry.example.test/',
    type: path,
  }),
  registry: new Definition('registry', {
    default: 'https://registry.example.test/',
    type: url,
    description: `
      The base URL of the npm registry.
    `,
    flatten,
  }),
  'replace-registry-host': new Definition('replace-registry-host', {
    default: 'npmjs',
  }),
}
