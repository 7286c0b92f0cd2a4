#!/usr/bin/env python3
"""op_kinds.py: one vocabulary of op categories for trainbench's --op-profile
and PyTorch's profiler, so the GPU bench can put the two side by side.

  CATEGORIES             conv_fwd, conv_dgrad, conv_wgrad, conv_bwd (CPU ops
                         only: dgrad and wgrad in one op), conv_gemm (GPU
                         kernels of convolutions whose name does not say the
                         direction), bn_fwd, bn_bwd,
                         elementwise, pool, linear, loss, convert, optimizer,
                         input, other
  TB_KIND_TO_CATEGORY    trainbench's op kinds (model/op_profile.c) -> category
  classify(names)        a PyTorch CUDA kernel name, or a CPU op with its
                         ancestors (leaf first), -> category, or None
  aggregate(kernels)     (name, us) in launch order -> per-category totals,
                         with cuDNN's helper kernels (offset computations,
                         split-K reductions) given to the conv they serve

Kernel names for the mapping come from the author's memory of nsys/profiler
traces of PyTorch eager ResNet-50 (cuDNN 8/9, cuBLAS(Lt), H100 and A100),
not from a trace taken here (no GPU was lent while this was written): the
bench prints the kernels it could not map, and the top kernels of each
category, so the patterns can be fixed from the first GPU run.

  python3 bench/op_kinds.py --self-test [--repo DIR]   # exit 0 when the mapping holds
"""
import argparse
import re
import sys

CATEGORIES = ["conv_fwd", "conv_dgrad", "conv_wgrad", "conv_bwd", "conv_gemm", "bn_fwd", "bn_bwd", "elementwise", "pool",
              "linear", "loss", "convert", "optimizer", "input", "other"]

TB_KIND_TO_CATEGORY = {
    "conv_fwd": "conv_fwd", "conv_dgrad": "conv_dgrad", "conv_wgrad": "conv_wgrad",
    "bn_fwd": "bn_fwd", "bn_bwd": "bn_bwd",
    "relu_fwd": "elementwise", "relu_bwd": "elementwise", "add_fwd": "elementwise", "add_bwd": "elementwise",
    "maxpool_fwd": "pool", "maxpool_bwd": "pool", "avgpool_fwd": "pool", "avgpool_bwd": "pool",
    "linear_fwd": "linear", "linear_bwd": "linear",
    "loss": "loss",
    "weight_convert": "convert", "grad_convert": "convert",
    "upload": "input", "input": "input",
    "nonfinite_check": "optimizer", "sgd": "optimizer", "loss_scale": "optimizer",
}

# (category, pattern), first match wins. Helpers: "conv_helper" goes to the
# next conv kernel's category, "after_helper" to the previous kernel's.
_RULES = [
    ("optimizer", r"multi_tensor_apply|foreach|Optimizer\.|optimizer|FusedSgd|fused_sgd|sgd_kernel|"
                  r"amp_update_scale|non_finite_check|amp_foreach|zero_grad"),
    ("convert", r"direct_copy|copy_kernel|bfloat16_copy|nchwToNhwc|nhwcToNchw|NchwToNhwc|NhwcToNchw|"
                r"aten::copy_$|aten::_to_copy$|aten::to$|ToCopyBackward|convertTensor|cast_kernel"),
    ("conv_helper", r"computeOffsetsKernel|computeBOffsetsKernel|computeWgradSplitKOffsetsKernel|"
                    r"computeWgradBOffsetsKernel|cask_cudnn::.*Offsets|cask__5x_cudnn::.*Offsets"),
    ("after_helper", r"splitKreduce|split_k_reduce|splitKReduce"),
    ("conv_dgrad", r"dgrad|conv\w*_backward_(data|input)|convolveBackwardData|ConvBackwardData"),
    ("conv_wgrad", r"wgrad|conv\w*_backward_(filter|weight)|convolveBackwardFilter|ConvBackwardFilter"),
    ("conv_bwd", r"convolution_backward|ConvolutionBackward"),
    ("conv_fwd", r"fprop|implicit_convolve|convolve_sgemm|convolveNd|implicit_gemm|conv2d_grouped_direct|"
                 r"aten::mkldnn_convolution$|aten::_slow_conv2d_forward$|aten::cudnn_convolution$|"
                 r"aten::thnn_conv2d$|conv_kernel|winograd|aten::conv2d$|aten::_?convolution$"),
    ("bn_bwd", r"bn_bw|batchnorm_bw|batch_norm_backward|BatchNormBackward|BatchNormBwd|bn_bwd|"
               r"nhwcBatchNormBwd"),
    ("bn_fwd", r"bn_fw|batchnorm_fw|batch_norm_collect|batch_norm_transform|batch_norm_update|batch_norm_elemt|"
               r"native_batch_norm|BatchNormFwd|bn_fwd|nhwcBatchNormFwd|batch_norm_stats|aten::batch_norm$|"
               r"_batch_norm_impl_index"),
    ("loss", r"softmax|SoftMax|nll_loss|NllLoss|cross_entropy|LogSoftmax"),
    ("pool", r"max_pool|MaxPool|avg_pool|AvgPool|adaptive_avg|adaptive_average|AdaptiveAvgPool|MeanOps|"
             r"MeanBackward"),
    # The first H200 run (cuDNN 9.19, torch 2.11): about 55 cuBLASLt `nvjet_sm90_*` GEMMs per step (PyTorch's
    # 1x1 convolutions through cuDNN's runtime-fused engines; ResNet-50's fc adds only 3), cuDNN's cutlass
    # `ImplicitGemmConvolution` (0.88 ms, filed under linear before) and `nhwcAddPaddingKernel` (the stem's 3
    # channels padded): convolutions, direction not in the name. Counted as convolutions of no direction,
    # the fc's GEMMs included, rather than as `other` and linear.
    ("conv_gemm", r"nvjet_|ImplicitGemmConvolution|nhwcAddPaddingKernel"),
    ("linear", r"gemm|gemv|cublas|Kernel2|addmm|aten::mm$|AddmmBackward|aten::linear$|cutlass"),
    ("elementwise", r"relu|Relu|clamp|threshold|CUDAFunctor_add|AddFunctor|add_kernel|elementwise|aten::add_?$|"
                    r"aten::mul_?$|aten::div_?$|fill|Fill|AddBackward|aten::sum$|reduce_kernel"),
    ("input", r"Memcpy HtoD|memcpy.*HtoD"),
    ("other", r"Memset|Memcpy|memset|memcpy|AccumulateGrad|detach|aten::flatten$|aten::view$|aten::empty"),
]
_COMPILED = [(c, re.compile(p)) for c, p in _RULES]


def classify_one(name):
    for cat, rx in _COMPILED:
        if rx.search(name):
            return cat
    return None


def classify(names):
    """names: a kernel name, or a CPU op's name and its ancestors' (leaf
    first). An optimizer ancestor wins (SGD's adds are not the model's);
    else the first of them that matches a rule. None: unmatched."""
    if isinstance(names, str):
        names = [names]
    for n in names:
        if classify_one(n) == "optimizer":
            return "optimizer"
    for n in names:
        c = classify_one(n)
        if c is not None:
            return c
    return None


def aggregate(kernels, steps):
    """kernels: [(name, microseconds)] in launch order (one stream), or
    [(names_leaf_first, microseconds)] for CPU ops. Returns (by_category,
    unmatched): by_category[cat] = {"ms_per_step", "calls_per_step", "top":
    [(name, ms_per_step), ...3]}; unmatched: [(name, ms_per_step,
    calls_per_step)], largest first."""
    cats = [classify(k[0]) for k in kernels]
    main = {"conv_fwd", "conv_dgrad", "conv_wgrad", "conv_bwd", "conv_gemm"}
    # helpers: offsets -> the next conv; split-K reductions -> the previous kernel
    nxt = None
    for i in range(len(cats) - 1, -1, -1):
        if cats[i] in main:
            nxt = cats[i]
        elif cats[i] == "conv_helper":
            cats[i] = nxt or "other"
    prev = None
    for i, c in enumerate(cats):
        if c == "after_helper":
            cats[i] = prev or "other"
        elif c is not None:
            prev = c
    tot, calls, per_name, unmatched = {}, {}, {}, {}
    for (names, us), c in zip(kernels, cats):
        name = names if isinstance(names, str) else names[0]
        key = c or "other"
        tot[key] = tot.get(key, 0.0) + us
        calls[key] = calls.get(key, 0) + 1
        per_name.setdefault(key, {})
        per_name[key][name] = per_name[key].get(name, 0.0) + us
        if c is None:
            u = unmatched.setdefault(name, [0.0, 0])
            u[0] += us
            u[1] += 1
    out = {}
    for cat in CATEGORIES:
        if cat not in tot:
            continue
        top = sorted(per_name[cat].items(), key=lambda kv: -kv[1])[:3]
        out[cat] = {"ms_per_step": tot[cat] / 1e3 / steps, "calls_per_step": calls[cat] / steps,
                    "top": [(n, t / 1e3 / steps) for n, t in top]}
    um = sorted(((n, v[0] / 1e3 / steps, v[1] / steps) for n, v in unmatched.items()), key=lambda x: -x[1])
    return out, um


# Real kernel and op names, with the category each must land in. The CUDA
# names are from memory of H100/A100 traces of PyTorch eager ResNet-50 with
# cuDNN 8/9 (not checked on a GPU here); the CPU op names from torch 1.13's
# CPU profiler on this machine.
SELF_TEST = [
    # from the H200 run's profile (results/gpu_h200_2026-11-27/resnet50.md)
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "conv_gemm"),
    ("nvjet_sm90_tst_128x128_64x6_1x2_h_bz_splitK_NTT", "conv_gemm"),
    ("_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22", "conv_gemm"),
    ("void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, true, (cudnnKernelDataType_t)0>(int, int, "
     "int, int, int, int, int, int, __nv_bfloat16 const*, __nv_bfloat16*, int, int, int, int, float, ", "conv_gemm"),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>"
     "(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)", "conv_fwd"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cudnn", "conv_fwd"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x16x64_stage4_"
     "warpsize4x1x1_g1_tensor16x8x16_alignc8_execute_kernel__5x_cudnn", "conv_fwd"),
    ("void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>"
     "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, "
     "float, float, int, float const*, float const*, bool, int, int)", "conv_fwd"),
    ("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cudnn", "conv_dgrad"),
    ("sm80_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4_warpsize2x2x1_g1_"
     "tensor16x8x16_kernel", "conv_dgrad"),
    ("void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*, int, "
     "float const*, int, float*, kernel_grad_params, unsigned long long, int, float, int, int, int)", "conv_dgrad"),
    ("sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cudnn", "conv_wgrad"),
    ("sm80_xmma_wgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage3_"
     "warpsize2x2x1_g1_tensor16x8x16_kernel", "conv_wgrad"),
    ("void cudnn::detail::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, "
     "int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
     "conv_wgrad"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__nv_bfloat16, float, 512, true, 1>(cudnnTensorStruct, "
     "__nv_bfloat16 const*, cudnnTensorStruct, __nv_bfloat16*, float const*, float const*, float, float, "
     "float*, float*, float*, float*, float, float)", "bn_fwd"),
    ("void cudnn::bn_bw_1C11_kernel_new<__nv_bfloat16, float, float2, 512, true, 1>(float, float, float, float, "
     "cudnnTensorStruct, __nv_bfloat16 const*, cudnnTensorStruct, __nv_bfloat16 const*, cudnnTensorStruct, "
     "__nv_bfloat16*, float const*, float*, float*, float const*, float const*, float)", "bn_bwd"),
    ("void cudnn::batchnorm_fwtr_nhwc_semiPersist<__nv_bfloat16, float, 512, 8, 2, 16, true, false, true>"
     "(cudnn::bnFwPersistentParams<__nv_bfloat16, float>)", "bn_fwd"),
    ("void cudnn::batchnorm_bwtr_nhwc_semiPersist<__nv_bfloat16, float, 512, 8, 2, 16, true, false, true>"
     "(cudnn::bnBwPersistentParams<__nv_bfloat16, float, float>)", "bn_bwd"),
    ("void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var, c10::BFloat16, float, "
     "4>(c10::BFloat16 const*, int, int, float*, float*, volatile float*, int*)", "bn_fwd"),
    ("void at::native::batch_norm_transform_input_channels_last_kernel<c10::BFloat16, float, float, 4>"
     "(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, float const*, float const*, "
     "c10::BFloat16*, int, int, bool)", "bn_fwd"),
    ("void at::native::batch_norm_backward_reduce_channels_last_kernel<4, c10::BFloat16, float, float>"
     "(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, float*, float*, float*, float*, "
     "volatile float*, int*, int, int)", "bn_bwd"),
    ("void at::native::batch_norm_backward_elemt_channels_last_kernel<4, c10::BFloat16, float, float>"
     "(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, float const*, float const*, "
     "float const*, c10::BFloat16*, int const*, int, int)", "bn_bwd"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
     "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::"
     "operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, "
     "at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(...), "
     "at::detail::Array<char*, 2>)", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
     "threshold_kernel_impl<c10::BFloat16>(at::TensorIteratorBase&, c10::BFloat16, c10::BFloat16)::"
     "{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, ...)", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
     "elementwise"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
     "at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, "
     "unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(...)",
     "convert"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nhwc<c10::BFloat16, float>(c10::BFloat16 const*, "
     "int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, c10::BFloat16*, long*)", "pool"),
    ("void at::native::(anonymous namespace)::max_pool_backward_nhwc<c10::BFloat16, float>(c10::BFloat16 const*, "
     "long const*, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, "
     "c10::BFloat16*)", "pool"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, "
     "float, float>, unsigned int, c10::BFloat16, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<"
     "float, float, float, float>, unsigned int, c10::BFloat16, 4>)", "pool"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
     "kernel__5x_cublas", "linear"),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", "linear"),
    ("void cutlass::Kernel<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
     "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)", "linear"),
    ("void (anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, float, (anonymous namespace)::"
     "LogSoftMaxForwardEpilogue>(float*, c10::BFloat16 const*, int)", "loss"),
    ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, "
     "float*, float const*, long const*, float const*, bool, long, long, long, long)", "loss"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
     "TensorListMetadata<3>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 3, 2, 2>, "
     "std::plus<float>, float>(...)", "optimizer"),
    ("Memset (Device)", "other"),
    ("Memcpy HtoD (Pageable -> Device)", "input"),
    # CPU ops (torch 1.13), leaf first with ancestors
    (["aten::mkldnn_convolution", "aten::_convolution", "aten::convolution", "aten::conv2d"], "conv_fwd"),
    (["aten::copy_", "aten::_to_copy", "aten::to", "aten::conv2d"], "convert"),
    (["aten::convolution_backward", "ConvolutionBackward0",
      "autograd::engine::evaluate_function: ConvolutionBackward0"], "conv_bwd"),
    (["aten::native_batch_norm", "aten::_batch_norm_impl_index", "aten::batch_norm"], "bn_fwd"),
    (["aten::native_batch_norm_backward", "NativeBatchNormBackward0"], "bn_bwd"),
    (["aten::threshold_backward", "ReluBackward0"], "elementwise"),
    (["aten::clamp_min_", "aten::relu_"], "elementwise"),
    (["aten::add", "Optimizer.step#SGD.step"], "optimizer"),
    (["aten::max_pool2d_with_indices", "aten::max_pool2d"], "pool"),
    (["aten::addmm", "aten::linear"], "linear"),
    (["aten::_log_softmax", "aten::log_softmax", "aten::cross_entropy_loss"], "loss"),
    (["aten::_log_softmax_backward_data", "LogSoftmaxBackward0"], "loss"),
    (["aten::conv2d"], "conv_fwd"),
    (["aten::_batch_norm_impl_index", "aten::batch_norm"], "bn_fwd"),
    (["torch::autograd::AccumulateGrad"], "other"),
]


def self_test(repo=None):
    bad = 0
    for names, want in SELF_TEST:
        got = classify(names)
        if got != want:
            bad += 1
            label = names if isinstance(names, str) else " < ".join(names)
            print(f"FAIL: {label[:110]}: {got}, expected {want}")
    # helpers: offsets to the next conv, split-K reductions to the previous kernel
    seq = [("cask_cudnn::computeOffsetsKernel<false, false>(cask_cudnn::ComputeOffsetsParams)", 1.0),
           ("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tile", 10.0),
           ("sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tile", 20.0),
           ("void cudnn::gemm::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, "
            "false, false>(cublasSplitKParams<float>, ...)", 2.0),
           ("some_kernel_nobody_knows<int>", 5.0)]
    agg, um = aggregate(seq, 1)
    checks = [(round(agg["conv_dgrad"]["ms_per_step"] * 1e3, 6), 11.0),
              (round(agg["conv_wgrad"]["ms_per_step"] * 1e3, 6), 22.0),
              (round(agg["other"]["ms_per_step"] * 1e3, 6), 5.0),
              (um[0][0], "some_kernel_nobody_knows<int>")]
    for got, want in checks:
        if got != want:
            bad += 1
            print(f"FAIL: aggregate: {got}, expected {want}")
    # every trainbench kind has a category, and only trainbench's kinds
    if repo:
        src = open(f"{repo}/model/op_profile.c").read()
        body = src[src.index("k_kind[TB_OPK_COUNT]"):src.index("};", src.index("k_kind[TB_OPK_COUNT]"))]
        kinds = re.findall(r'"([a-z_]+)"', body)
        if sorted(kinds) != sorted(TB_KIND_TO_CATEGORY):
            bad += 1
            print(f"FAIL: trainbench kinds {sorted(kinds)} vs mapped {sorted(TB_KIND_TO_CATEGORY)}")
    for k, c in TB_KIND_TO_CATEGORY.items():
        if c not in CATEGORIES:
            bad += 1
            print(f"FAIL: {k} -> {c}, not a category")
    print(f"# op_kinds self-test: {len(SELF_TEST) + len(checks)} checks, {bad} failed")
    return bad == 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--repo", help="repository root: check the mapping covers model/op_profile.c's kinds")
    a = ap.parse_args()
    if not a.self_test:
        ap.print_help()
        sys.exit(2)
    sys.exit(0 if self_test(a.repo) else 1)
