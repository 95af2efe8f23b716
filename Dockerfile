# cairn in a container: `make docker` (or `docker build --build-arg CAIRN_COMMIT=$(git rev-parse
# --short=12 HEAD) -t cairn .`), then
#   docker run -d -p 6380:6380 -p 9121:9121 -v cairn-data:/data cairn
# Stage 1 builds the release binary; stage 2 is a slim runtime with only that binary, run as
# an unprivileged user, its snapshot and write-behind logs in the /data volume.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The build context has no .git (see .dockerignore): the commit comes as a build argument.
ARG CAIRN_COMMIT=unknown
ENV CAIRN_COMMIT=${CAIRN_COMMIT}
RUN cargo build --release --locked -p cairn-server \
    && cp target/release/cairn-server /usr/local/bin/cairn-server

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin cairn \
    && mkdir -p /data && chown cairn:cairn /data
COPY --from=build /usr/local/bin/cairn-server /usr/local/bin/cairn-server
USER cairn
WORKDIR /data
VOLUME ["/data"]
# RESP, memcached, metrics (/metrics, /healthz, /readyz).
EXPOSE 6380 11212 9121
# Ready = the metrics endpoint's /readyz answers 200 (snapshot loaded); bash's /dev/tcp keeps
# curl out of the image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9121 && printf 'GET /readyz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' >&3 && read -r -t 3 status <&3 && [[ $status == *' 200 '* ]]"]
ENTRYPOINT ["cairn-server"]
CMD ["--bind", "0.0.0.0", "--dir", "/data", "--metrics-port", "9121", "--metrics-bind", "0.0.0.0"]
