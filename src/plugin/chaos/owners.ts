// The default `authors.bind` list: the GitHub handles of CoreDNS's maintainers
// as shipped in CoreDNS v1.15.0 (the same as v1.14.7's) (generated there from its CODEOWNERS file).
export const OWNERS: readonly string[] = [
  'Tantalor93', 'bradbeam', 'chrisohaver', 'darshanime', 'dilyevsky', 'ekleiner', 'greenpau', 'houyuwushang',
  'ihac', 'inigohu', 'isolus', 'jameshartig', 'johnbelamaric', 'miekg', 'mqasimsarfraz', 'nchrisdk', 'nitisht',
  'pmoroney', 'rajansandeep', 'rdrozhdzh', 'rtreffer', 'snebel29', 'stp-ip', 'superq', 'thevilledev', 'varyoo',
  'ykhr53', 'yongtang', 'zouyee',
];
