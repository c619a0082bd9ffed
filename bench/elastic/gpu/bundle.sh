#!/usr/bin/env bash
# Makes .gpu-elastic/ (ignored; carried to the device): peer, peerctl, the
# cuda backend from BUILD (a Release build with the CUDA toolkit), the two
# Debian libraries the device image lacks, Fashion-MNIST, the run script.
set -eu
BUILD=${1:-build-gpu}
D=.gpu-elastic
rm -rf "$D" && mkdir -p "$D/lib" "$D/data"
cp "$BUILD/peer" "$BUILD/peerctl" "$D/"
cp "$(find "$BUILD" -name libstarling_cuda.so | head -1)" "$D/"
cp /lib/x86_64-linux-gnu/libcjson.so.1 /lib/x86_64-linux-gnu/libz.so.1 "$D/lib/"
cp -r /usr/share/datasets/fashion-mnist "$D/data/"
cp bench/elastic/gpu/run_on_device.sh "$D/run.sh"
cp bench/elastic/gpu/torch_ddp_gpu.py bench/train/torch_train.py "$D/"
grep -qx "$D" .git/info/exclude 2>/dev/null || echo "$D" >> .git/info/exclude
du -sh "$D"
