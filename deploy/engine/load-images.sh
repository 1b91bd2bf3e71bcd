#!/usr/bin/env bash
# Copies Moria's images from podman's store into Docker's, so that both engines run the same
# images and nothing is built twice (make images MORIA_ENGINE=docker IMAGES_FROM=podman).
#   deploy/engine/load-images.sh                 every image of `deploy/images.py list`
#   deploy/engine/load-images.sh babyai agent    some of them (names as in that list)
# One `podman save --multi-image-archive | docker load`: the layers the images share (the base,
# the project's dependencies) cross once. podman names them localhost/moria/...; Docker's Compose
# looks for moria/... (docker.io/moria/... to Docker), so each is tagged under the compose file's
# name and the localhost/ name removed (an untag: the layers stay). An image Docker already has
# under the same ID is skipped. Needs root where the podman store and dockerd are root's.
set -euo pipefail
cd "$(dirname "$0")/../.."

for tool in podman docker; do
  command -v "$tool" >/dev/null || { echo "load-images.sh: $tool is missing" >&2; exit 1; }
done
docker info >/dev/null 2>&1 || { echo "load-images.sh: no Docker daemon answers (make docker-setup)" >&2; exit 1; }

wanted=("$@")
tags=()
while IFS=$'\t' read -r name tag _; do
  if [ ${#wanted[@]} -eq 0 ] || [[ " ${wanted[*]} " == *" $name "* ]]; then tags+=("$tag"); fi
done < <(python3 deploy/images.py list)
if [ ${#tags[@]} -eq 0 ]; then echo "load-images.sh: no image named ${wanted[*]}" >&2; exit 1; fi

start=$SECONDS
todo=()
for tag in "${tags[@]}"; do
  id=$(podman image inspect --format '{{.Id}}' "localhost/$tag" 2>/dev/null) \
    || { echo "load-images.sh: podman has no localhost/$tag (make images with podman first)" >&2; exit 1; }
  have=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  if [ "$have" = "sha256:$id" ]; then
    echo "load: $tag already in Docker (${id:0:12})"
  else
    todo+=("$tag")
  fi
done
if [ ${#todo[@]} -gt 0 ]; then
  echo "load: podman save | docker load of ${todo[*]}"
  podman save --quiet --format docker-archive --multi-image-archive "${todo[@]/#/localhost/}" \
    | docker load --quiet
  for tag in "${todo[@]}"; do
    docker tag "localhost/$tag" "$tag"
    docker rmi "localhost/$tag" >/dev/null
    id=$(podman image inspect --format '{{.Id}}' "localhost/$tag")
    got=$(docker image inspect --format '{{.Id}} {{.Size}}' "$tag")
    if [ "${got%% *}" != "sha256:$id" ]; then
      echo "load-images.sh: $tag has ID ${got%% *} in Docker, sha256:$id in podman" >&2
      exit 1
    fi
    echo "loaded $tag (${id:0:12}, $(( ${got##* } / 1000000 )) MB)"
  done
fi
echo "load: ${#tags[@]} images in Docker, ${#todo[@]} loaded, in $((SECONDS - start)) s"
