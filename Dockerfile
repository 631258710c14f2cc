# ferry's image for users who build with Docker. It has the layout that
# `make image` builds without Docker (internal/imagebuild): busybox-static
# with a link per applet in /bin, ferry at /usr/local/bin/ferry.
#   docker build -t ferry:dev .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ferry ./cmd/ferry

FROM debian:bookworm-slim AS busybox
RUN apt-get update && apt-get install -y --no-install-recommends busybox-static \
 && mkdir -p /out/bin /out/etc /out/root /out/tmp && chmod 1777 /out/tmp \
 && cp /bin/busybox /out/bin/busybox \
 && for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox /out/bin/$a; done \
 && printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > /out/etc/passwd \
 && printf 'root:x:0:\nnobody:x:65534:\n' > /out/etc/group

FROM scratch
COPY --from=busybox /out/ /
COPY --from=build /out/ferry /usr/local/bin/ferry
ENV PATH=/usr/local/bin:/bin
WORKDIR /
ENTRYPOINT ["/usr/local/bin/ferry"]
