# shellcheck shell=sh
# bundle_env.sh - the GPU bundle's env.sh (tests/gpu/make_bundle.sh copies
# it in): TB_BUNDLE=/abs/gpu-bundle; . "$TB_BUNDLE/env.sh" puts the
# bundle's programs and libraries first and relocates Open MPI and PMIx to
# where the bundle was unpacked. A slim NCCL the bundle carries
# (nccl/lib, from tests/gpu/slim_nccl.sh) goes before every other library
# folder, so it is loaded ahead of PyTorch's NCCL (which run_suite.sh
# appends: tests/gpu/suite_env.sh); tests/gpu/test_bundle_env.sh checks
# the order with stand-in libraries.
: "${TB_BUNDLE:=$PWD/gpu-bundle}"
export TB_BUNDLE
export OPAL_PREFIX="$TB_BUNDLE/root/usr"
export PMIX_PREFIX="$TB_BUNDLE/root/usr/lib/x86_64-linux-gnu/pmix2"
# PMIx derives neither its help files nor its plugin path from PMIX_PREFIX
export PMIX_DATADIR="$PMIX_PREFIX/share" PMIX_PKGDATADIR="$PMIX_PREFIX/share/pmix"
export PMIX_MCA_mca_base_component_path="$PMIX_PREFIX/lib/pmix"
# the H100 image has its own pmix2 under /usr/lib; PMIx still tried that
# copy's zlib plugin (undefined symbol pmix_output_info, 2026-11-27) and then
# printed a 12-line compression warning into every mpirun's output
export PMIX_MCA_pcompress_base_silence_warning=1
export PATH="$TB_BUNDLE/root/usr/bin:$TB_BUNDLE/build:$PATH"
export LD_LIBRARY_PATH="$TB_BUNDLE/lib:$TB_BUNDLE/root/usr/lib/x86_64-linux-gnu/openmpi/lib:$TB_BUNDLE/root/usr/lib/x86_64-linux-gnu/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -f "$TB_BUNDLE/nccl/lib/libnccl.so.2" ]; then
  export LD_LIBRARY_PATH="$TB_BUNDLE/nccl/lib:$LD_LIBRARY_PATH"
  export TB_BUNDLE_NCCL="$TB_BUNDLE/nccl"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# no InfiniBand or UCX on the lent machine: shared memory and TCP only
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_osc=^ucx
# one node: the rsh agent is never started, but Open MPI wants one to exist
export OMPI_MCA_plm_rsh_agent=false
