/* test_gpu_versions.c - probe's pure logic, no GPU needed: version strings
 * from the libraries' codes, the compiled-vs-loaded verdict for each kind of
 * mismatch (SEEDS.md section 3's "driver 12.2, framework built for 12.1"
 * among them), and the datasheet lookup by device name. */
#include <string.h>

#include "src/device/gpu_peaks.h"
#include "src/device/gpu_versions.h"
#include "tests/tb_test.h"

static void expect(tb_lib_kind k, int built, int loaded, tb_ver_verdict want, const char *in_note) {
    tb_lib_check c;
    tb_version_judge(k, built, loaded, &c);
    TB_CHECK(c.verdict == want, "%s built %s loaded %s: verdict '%s', want '%s' (%s)", c.what, c.compiled_s,
             c.loaded_s, tb_verdict_name(c.verdict), tb_verdict_name(want), c.note);
    if (in_note) TB_CHECK(strstr(c.note, in_note) != NULL, "%s: note '%s' lacks '%s'", c.what, c.note, in_note);
}

int main(void) {
    char b[24];
    tb_lib_version_string(TB_LIB_DRIVER, 12020, b, sizeof b);
    TB_CHECK(strcmp(b, "12.2") == 0, "12020 -> %s", b);
    tb_lib_version_string(TB_LIB_CUDNN, 91900, b, sizeof b);
    TB_CHECK(strcmp(b, "9.19.0") == 0, "91900 -> %s", b);
    tb_lib_version_string(TB_LIB_NCCL, 22809, b, sizeof b);
    TB_CHECK(strcmp(b, "2.28.9") == 0, "22809 -> %s", b);
    tb_lib_version_string(TB_LIB_CUBLAS, 0, b, sizeof b);
    TB_CHECK(strcmp(b, "none") == 0, "0 -> %s", b);

    /* driver vs runtime */
    expect(TB_LIB_DRIVER, 12010, 12020, TB_VER_DIFFERS_OK, "newer");   /* the seeds' case: works, flagged */
    expect(TB_LIB_DRIVER, 13000, 13000, TB_VER_MATCH, NULL);
    expect(TB_LIB_DRIVER, 13000, 12080, TB_VER_ERROR, "update the driver");
    expect(TB_LIB_DRIVER, 13010, 13000, TB_VER_WARN, "minor-version");
    expect(TB_LIB_DRIVER, 13000, 0, TB_VER_ABSENT, "no NVIDIA driver");
    /* cuDNN and cuBLAS */
    expect(TB_LIB_CUDNN, 91900, 91900, TB_VER_MATCH, NULL);
    expect(TB_LIB_CUDNN, 91900, 91000, TB_VER_WARN, "older library");
    expect(TB_LIB_CUDNN, 91900, 92100, TB_VER_WARN, "newer is supported");
    expect(TB_LIB_CUDNN, 91900, 80902, TB_VER_ERROR, "ABI");
    expect(TB_LIB_CUDNN_CUDART, 13000, 12080, TB_VER_ERROR, "CUDA 13");
    expect(TB_LIB_CUDNN_CUDART, 13000, 13010, TB_VER_DIFFERS_OK, NULL);
    expect(TB_LIB_CUBLAS, 130100, 120903, TB_VER_ERROR, NULL);
    expect(TB_LIB_CUBLAS, 130100, 130000, TB_VER_WARN, NULL);
    /* NCCL: any difference is worth a line */
    expect(TB_LIB_NCCL, 22809, 22809, TB_VER_MATCH, NULL);
    expect(TB_LIB_NCCL, 22809, 21903, TB_VER_WARN, "non-blocking");
    expect(TB_LIB_NCCL, 22809, 0, TB_VER_ABSENT, NULL);
    expect(TB_LIB_NCCL, 22809, 21703, TB_VER_ERROR, "2.17.3 is loaded but trainbench needs 2.18"); /* too old to run */
    expect(TB_LIB_NCCL, 22809, 2804, TB_VER_ERROR, "NCCL 2.8.4 is loaded"); /* the old code scheme: 2804 */

    /* datasheet lookup: specific names before the family */
    const tb_gpu_peak *p = tb_gpu_peak_find("NVIDIA H100 80GB HBM3");
    TB_CHECK(p && strcmp(p->label, "H100 SXM5 80GB") == 0 && p->bf16_tflops > 900, "H100 SXM -> %s",
             p ? p->label : "none");
    p = tb_gpu_peak_find("NVIDIA H100 PCIe");
    TB_CHECK(p && p->bf16_tflops < 800, "H100 PCIe -> %s", p ? p->label : "none");
    p = tb_gpu_peak_find("NVIDIA H200");
    TB_CHECK(p && p->hbm_gbs == 4800, "H200 -> %s", p ? p->label : "none");
    p = tb_gpu_peak_find("NVIDIA A100-SXM4-40GB");
    TB_CHECK(p && p->hbm_gbs == 1555, "A100 40GB -> %s", p ? p->label : "none");
    TB_CHECK(tb_gpu_peak_find("NVIDIA GeForce RTX 4090") == NULL, "unknown GPU must give no ceiling");
    /* names that hold a shorter entry's: the specific row, or none */
    p = tb_gpu_peak_find("NVIDIA H200 NVL");
    TB_CHECK(p && strcmp(p->label, "H200 NVL 141GB") == 0 && p->bf16_tflops < 900, "H200 NVL -> %s",
             p ? p->label : "none");
    p = tb_gpu_peak_find("NVIDIA H800 PCIe");
    TB_CHECK(p && p->hbm_gbs == 2000, "H800 PCIe -> %s", p ? p->label : "none");
    p = tb_gpu_peak_find("NVIDIA A100-PCIE-40GB");
    TB_CHECK(p && p->hbm_gbs == 1555, "A100 PCIe 40GB -> %s", p ? p->label : "none");
    TB_CHECK(tb_gpu_peak_find("NVIDIA GH200 480GB") == NULL, "GH200 must give no ceiling (not the H200's)");
    return tb_test_exit("gpu_versions");
}
