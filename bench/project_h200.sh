#!/bin/sh
# project_h200.sh [RUN.h5] [OUTDIR]: issue 26's projection of one H200's
# ResNet-50 bf16 step to real fabrics, from a results file, by script:
#
#   nvlink4-h100, nvlink4-h800         4 and 8 GPUs in one node
#   nvlink4-h100+ndr400x8              8 to 512 GPUs (8 per node, InfiniBand NDR)
#   nvlink4-h800+roce200x2             8 to 512 GPUs (8 per node, 2 x 200 GbE RoCE)
#
# each with the what-if columns (bucket size, bf16 gradients, overlap off,
# the BatchNorm statistics broadcast off,
# the per-rank batch), written to OUTDIR/NAME.proj.txt (the console output)
# and OUTDIR/NAME.proj.h5 (/projection), then one markdown file,
# OUTDIR.md, made by bench/projection_tables.py: the tables labelled
# projected, the published rows of OUTDIR/published.tsv beside them and the
# differences computed. Nothing is typed into the tables.
#
# RUN.h5 (default: the stored H200 run, results/gpu_h200_2026-11-27/
# tb_bf16_nhwc_256_graph.h5): a 1-rank run; with /grad_ready (a run with
# --scaling-steps, as the GPU suite's nccl stage now makes,
# keep/nccl/timeline_1rank.h5) its gradient-ready times are measured by
# CUDA events, else estimated from the model's per-layer work, and the
# output says which. TB (default build/trainbench), PY (python3 with h5py).
set -eu
cd "$(dirname "$0")/.."
run=${1:-results/gpu_h200_2026-11-27/tb_bf16_nhwc_256_graph.h5}
out=${2:-results/projection_h200}
tb=${TB:-build/trainbench}
py=${PY:-python3}
whatif="bucket=5M,bucket=100M,bf16,no-overlap,no-bn-broadcast,batch=0.78,batch=0.5,batch=0.2"
mkdir -p "$out"
[ -f "$out/published.tsv" ] || cp results/projection_h200/published.tsv "$out/published.tsv"
project() { # NAME FABRIC RANKS
  "$tb" project "$run" --fabric "$2" --ranks "$3" --what-if "$whatif" --out "$out/$1.proj.h5" >"$out/$1.proj.txt"
  echo "== $1: $(grep -c '^ ' "$out/$1.proj.txt") rows ($2, ranks $3)"
}
project nvlink4-h100 nvlink4-h100 1,2,4,8
project nvlink4-h800 nvlink4-h800 1,2,4,8
project nvlink4-h100+ndr400x8 nvlink4-h100+ndr400x8 1,8,16,32,64,128,256,512
project nvlink4-h800+roce200x2 nvlink4-h800+roce200x2 1,8,16,32,64,128,256,512
"$py" bench/projection_tables.py --run "$run" --published "$out/published.tsv" \
  --proj "$out/nvlink4-h100.proj.h5" "$out/nvlink4-h800.proj.h5" "$out/nvlink4-h100+ndr400x8.proj.h5" \
  "$out/nvlink4-h800+roce200x2.proj.h5" --command "bench/project_h200.sh $run $out" >"$out.md"
echo "== $out.md"
