#!/usr/bin/env bash
# Copy to .gpu/run.sh beside peerctl, libstarling_cuda.so, lib/ (libcjson, libz), data/fashion-mnist and torch_train.py.
# GPU checks: the real-GPU CUDA test, then peerctl train --device cuda against
# PyTorch on the same GPU, interleaved (MLP and CNN, 3 rounds each).
set -u
G=$(cd "$(dirname "$0")" && pwd) # the bundle: .gpu/ in the checkout, carried to the GPU machine
export LD_LIBRARY_PATH=$G/lib SL_DATASETS=$G/data SL_CUDA_BACKEND=$G/libstarling_cuda.so
nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())"
echo "== nn_cuda_test"
"$G/nn_cuda_test"; echo "nn_cuda_test rc=$?"
for model in mlp cnn; do
  if [ $model = mlp ]; then spec=mlp:256,128; ep=5; else spec=cnn:32,64; ep=3; fi
  for r in 1 2 3; do
    echo "== round $r $model starling"
    "$G/peerctl" train --device cuda --model $spec --epochs $ep --batch 128 --json --quiet > "$OUT/sl_${model}_$r.jsonl.tmp" 2>&1; echo rc=$?
    tail -2 "$OUT/sl_${model}_$r.jsonl.tmp"; cat "$OUT/sl_${model}_$r.jsonl.tmp" >> "$OUT/starling.jsonl"; rm "$OUT/sl_${model}_$r.jsonl.tmp"
    echo "== round $r $model torch"
    python3 "$G/torch_train.py" --device cuda --model $model --epochs $ep --batch 128 --data "$G/data/fashion-mnist" > "$OUT/pt.tmp" 2>&1; echo rc=$?
    tail -2 "$OUT/pt.tmp"; cat "$OUT/pt.tmp" >> "$OUT/torch.jsonl"; rm "$OUT/pt.tmp"
  done
done
