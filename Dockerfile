# membuf serve in an image with nothing but the binary, run as a non-root
# user. Build: docker build -t membuf .
# Run:    docker run -p 8980:8980 -v membuf-data:/data membuf
#         (add --tls-cert, --tls-key and --htpasswd before exposing it:
#         docs/cas.md, "Security"; the log warns until then)
#
# CI has no Docker engine: .ci/check-deploy runs this build stage's command,
# .ci/build-static, and checks the binary is static; `docker build` itself
# is not run there.

FROM golang:1.26.8 AS build
WORKDIR /src
COPY . .
RUN .ci/build-static /out/membuf
# The store's directory, owned by the user the server runs as (a volume
# mounted on it takes this ownership when it is created).
RUN mkdir -p /out/data

FROM scratch
COPY --from=build /out/membuf /membuf
# Root CAs, for a bucket or an upstream cache over HTTPS (--upstream).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME /data
EXPOSE 8980
ENTRYPOINT ["/membuf"]
# gRPC on every interface of the container; HTTP (metrics, /healthz) stays on
# the container's loopback unless you add --http :8981 and publish it.
CMD ["serve", "--listen", ":8980", "--dir", "/data"]
