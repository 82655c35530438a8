# imgapi's container image: the server, its workers and its CLI, with LibreOffice, poppler, ffmpeg,
# the fonts and jemalloc. docs/container.md says how to build and run it; in short:
#
#   docker build --build-arg IMGAPI_VERSION=$(npm pkg get version | tr -d '"') -t imgapi .
#   docker run -d --name imgapi -p 3000:3000 -v imgapi-data:/data --stop-timeout 45 \
#     --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     --security-opt systempaths=unconfined imgapi    # podman needs only systempaths=unconfined
#
# The --security-opt flags are for the converter sandbox (CONVERTER_SANDBOX, default `required`):
# LibreOffice and poppler run inside bubblewrap, which needs to create a user namespace and mount
# a fresh /proc there. A container engine's defaults forbid both (Docker's seccomp profile and
# AppArmor block the namespace; Docker and Podman mask parts of /proc, which forbids a new proc
# mount). Without the flags, the service still starts, /readyz says `sandbox: ok=false` and why,
# and presentation tasks fail CONVERSION_FAILED; CONVERTER_SANDBOX=auto would run the converters
# unconfined instead, able to read every account's files: for single-tenant installs only.

# ---------------------------------------------------------------------------------------------
# Build: compile the server, the SDK it uses and the dashboard; then keep production packages only.
FROM node:26-bookworm-slim AS build
# better-sqlite3 compiles against Node's headers (its prebuilt binaries come from GitHub, which
# not every build host reaches); the image's Node ships them in /usr/local/include.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 make g++ >/dev/null \
 && rm -rf /var/lib/apt/lists/*
ENV npm_config_nodedir=/usr/local npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --include=dev
COPY web/package.json web/package-lock.json web/
RUN npm --prefix web ci --include=dev
COPY tsconfig.json ./
COPY src src
COPY sdk sdk
COPY web web
RUN npx tsc -p tsconfig.json && npm --prefix web run build
# The version the labels carry must be package.json's, the one `imgapi --version` reports.
ARG IMGAPI_VERSION=
RUN test -z "$IMGAPI_VERSION" || test "$IMGAPI_VERSION" = "$(node -p 'require("./package.json").version')" \
 || { echo "IMGAPI_VERSION=$IMGAPI_VERSION is not package.json's version" >&2; exit 1; }
# Then the production packages only, without what a running server never reads: better-sqlite3's
# C sources and compiler output (its addon is build/Release/better_sqlite3.node), declarations, maps.
RUN npm prune --omit=dev \
 && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
 && find node_modules/better-sqlite3/build -mindepth 1 -not -path '*/Release' -not -name better_sqlite3.node -prune -exec rm -rf {} + \
 && find node_modules \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.map' \) -type f -delete

# ---------------------------------------------------------------------------------------------
# Runtime: Node, the programs the service runs, and the built service; no compiler, no dev packages.
FROM node:26-bookworm-slim
# The Debian packages come from scripts/setup.mjs's table, the same list `npm start` installs on a
# host; tini runs as PID 1: it passes SIGTERM on and reaps the converters' orphaned processes.
# jemalloc gets one path whatever the architecture, for LD_PRELOAD below (sharp advises it on
# glibc; scripts/start.mjs preloads it on a host). /data belongs to the service's user, so a new
# named volume mounted there starts writable.
# Documentation, manual pages and message translations are left out (about 100 MB), as Debian's
# own slim images do; the copyright notices stay.
COPY scripts/setup.mjs scripts/start.mjs scripts/node-runtime.mjs /tmp/setup/
RUN printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' 'path-exclude /usr/share/man/*' \
      'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' >/etc/dpkg/dpkg.cfg.d/imgapi-slim \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      $(node /tmp/setup/setup.mjs --packages) tini >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/setup \
 && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc\.so\.2$')" /usr/local/lib/libjemalloc.so.2 \
 && groupadd --gid 10001 imgapi \
 && useradd --uid 10001 --gid imgapi --home-dir /data --no-create-home --shell /usr/sbin/nologin imgapi \
 && install -d -o imgapi -g imgapi -m 0750 /data
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist/src dist/src
COPY --from=build /src/dist/sdk dist/sdk
COPY --from=build /src/web/dist web/dist
COPY bin bin
RUN ln -s /app/bin/imgapi.mjs /usr/local/bin/imgapi && imgapi --version

# Every setting is an environment variable (docs/configuration.md); these are the image's defaults.
ENV NODE_ENV=production \
    DATA_DIR=/data \
    HOST=0.0.0.0 \
    PORT=3000 \
    LD_PRELOAD=/usr/local/lib/libjemalloc.so.2
VOLUME /data
EXPOSE 3000
USER imgapi
# /readyz answers 503 while the database or storage is unreachable.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 3000}/readyz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM drains: no new requests or claims, running tasks finish within 20 s or go back to the
# queue, hard stop at 30 s. Give the container that long (docker run --stop-timeout 45,
# compose stop_grace_period); the engines' default of 10 s would cut the drain short.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "imgapi"]
CMD ["serve"]

ARG IMGAPI_VERSION=
LABEL org.opencontainers.image.title="imgapi" \
      org.opencontainers.image.description="Self-hosted image processing API: upload, queue a job, poll, download." \
      org.opencontainers.image.version="${IMGAPI_VERSION}" \
      org.opencontainers.image.licenses="LicenseRef-UNLICENSED" \
      org.opencontainers.image.documentation="docs/container.md"
