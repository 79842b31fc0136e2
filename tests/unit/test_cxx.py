"""Unit tests of gpu_course/cuda/cxx/, the C++ front end of the GPU split build, the CPU
emulation and get_sig: tokens, top-level statements, declarations, functions and launches."""
import pytest

from gpu_course.cuda import cxx


def parse(src):
    toks = cxx.tokenize(src)
    match = cxx.match_brackets(toks)
    return toks, match, cxx.statements(toks, match)


def decls(src):
    toks, match, stmts = parse(src)
    return toks, [cxx.analyze(toks, match, s) for s in stmts if s.kind == "decl"]


def test_tokens_skip_comments_strings_and_literals():
    src = r'''int a = 1'000'000; char q = '\''; const char* s = "} <<< {"; // k<<<1,1>>>() {
auto r = R"x( ) " { <<< )x"; /* { */ float f = .5e-3f;'''
    texts = [t.text for t in cxx.tokenize(src)]
    assert "1'000'000" in texts and r"'\''" in texts and '"} <<< {"' in texts
    assert 'R"x( ) " { <<< )x"' in texts and ".5e-3f" in texts
    assert "<<<" not in texts and "{" not in texts  # only inside literals and comments


def test_preprocessor_lines_are_one_token_with_their_continuations():
    toks = cxx.tokenize("#define F(x) \\\n  k<<<1, 1>>>(x)\nint y;")
    assert [t.kind for t in toks] == ["pp", "id", "id", "punct"]
    assert toks[1].line == 3


def test_statements_enter_namespaces_and_linkage_blocks():
    src = '''#include <cstdio>
namespace outer::inner { __global__ void k(int* p) { *p = 1'000; } }
extern "C" { void c_api(int); }
namespace { int hidden = 2; }
struct S { int a; } s;
template <int N = 4> __global__ void t(float* x) { x[0] = N > 2 ? 1 : 0; }
auto f = [](int x) { return x; };
'''
    toks, match, stmts = parse(src)
    got = [(s.kind, s.scope, cxx.text_of(toks, s.a, s.b)[:30]) for s in stmts]
    assert got == [
        ("pp", (), "#include <cstdio>"),
        ("open", (), "namespace outer::inner {"),
        ("decl", ("outer::inner",), "__global__ void k(int* p) { *p"),
        ("close", ("outer::inner",), "}"),
        ("open", (), 'extern "C" {'),
        ("decl", ('extern "C"',), "void c_api(int);"),
        ("close", ('extern "C"',), "}"),
        ("open", (), "namespace {"),
        ("decl", ("",), "int hidden = 2;"),
        ("close", ("",), "}"),
        ("decl", (), "struct S { int a; } s;"),
        ("decl", (), "template <int N = 4> __global_"),
        ("decl", (), "auto f = [](int x) { return x;"),
    ]


def test_analyze_functions_variables_and_types():
    src = '''template <int TW>
__global__ void __launch_bounds__(256) tiled_k(const float* __restrict__ a, float* out) { }
static inline int helper(int a) { return a; }
std::vector<torch::Tensor> two(const torch::Tensor& a, int64_t n);
auto trailing(int x) -> float { return x; }
__constant__ float mask[2 * 3 + 1], bias = 1.0f;
static __device__ int counter{0};
int a = 1'000;
struct alignas(16) Pair { float a; int b; };
using namespace std;
'''
    toks, ds = decls(src)
    k, helper, two, trailing, mask, counter, a, pair, using = ds
    assert (k.kind, k.name, k.template is not None) == ("function", "tiled_k", True)
    assert {"__global__", "void"} <= k.specifiers and "__launch_bounds__" in k.specifiers
    assert cxx.text_of(toks, k.a, k.head_end).endswith("tiled_k(const float* __restrict__ a, float* out)")
    assert (helper.name, helper.body is not None, {"static", "inline"} <= helper.specifiers) == ("helper", True, True)
    assert (two.kind, two.name, two.body) == ("function", "two", None)
    assert (trailing.kind, trailing.name, trailing.body is not None) == ("function", "trailing", True)
    assert mask.kind == "variable" and [toks[q].text for q, _ in mask.names] == ["mask", "bias"]
    assert "__constant__" in mask.specifiers and mask.names[0][1] is None and mask.names[1][1] is not None
    assert (counter.kind, counter.name, {"static", "__device__"} <= counter.specifiers) == ("variable", "counter", True)
    assert (a.kind, a.name) == ("variable", "a")
    assert (pair.kind, pair.name, pair.body is not None) == ("type", "Pair", True)
    assert using.kind == "other"


def test_find_functions_finds_members_and_operators():
    src = '''struct Op {
    __device__ float operator()(float v) const { return v; }
    __host__ __device__ int size() const { return 1; }
};
__global__ void k(Op op, float* x);
__device__ __forceinline__ float sq(float v) { return v * v; }
'''
    toks = cxx.tokenize(src)
    fs = cxx.find_functions(toks, cxx.match_brackets(toks))
    assert [(f.qualifier, f.name, f.body is not None) for f in fs] == [
        ("__device__", "operator()", True), ("__device__", "size", True),
        ("__global__", "k", False), ("__device__", "sq", True)]


def test_find_launches_several_per_statement_templates_and_lambdas():
    src = '''void f(int n) {
    auto go = [&](float* p) { a_k<<<cdiv(n, 256), 256>>>(p, n); };
    ns::b_k<16, float><<<dim3(2, 2), dim3(16, 16), 16 * sizeof(float), 0>>>(x), c_k<<<1, 1>>>();
    d_k<std::max<int>(1, 2)><<<n >> 5, 32>>>(y);
}'''
    toks = cxx.tokenize(src)
    match = cxx.match_brackets(toks)
    ls = cxx.find_launches(toks, match)
    assert [L.name for L in ls] == ["a_k", "b_k", "c_k", "d_k"]
    assert [len(L.config) for L in ls] == [2, 4, 2, 2]
    assert cxx.text_of(toks, ls[1].start, ls[1].lt) == "ns::b_k<16, float>"
    assert [cxx.text_of(toks, a, b) for a, b in ls[1].config] == [
        "dim3(2, 2)", "dim3(16, 16)", "16 * sizeof(float)", "0"]
    assert cxx.text_of(toks, ls[3].config[0][0], ls[3].config[0][1]) == "n >> 5"
    assert ls[0].template_args is None and cxx.text_of(toks, *ls[1].template_args) == "<16, float"


def test_a_comparison_in_a_launch_configuration_is_not_a_template_bracket():
    """Was: "launch configuration with 1 values" for a grid capped by a ternary (the GPU build then fell
    back to one nvcc unit, which keeps no launch log for an exercise's check)."""
    src = "void f(int n) { k<<<cdiv(n, 256) < 8 ? cdiv(n, 256) : 8, 256, 0, s>>>(x, n < 4 ? 1 : 2); }"
    toks = cxx.tokenize(src)
    (L,) = cxx.find_launches(toks, cxx.match_brackets(toks))
    assert [cxx.text_of(toks, a, b) for a, b in L.config] == ["cdiv(n, 256) < 8 ? cdiv(n, 256) : 8", "256", "0", "s"]


def test_a_malformed_launch_names_its_line():
    toks = cxx.tokenize("void f() {\n  k<<<1, 1>>>;\n}")
    with pytest.raises(cxx.LaunchSyntaxError, match="line 2: could not read this kernel launch"):
        cxx.find_launches(toks, cxx.match_brackets(toks))


def test_get_sig_says_when_the_braces_do_not_balance():
    """Was: "get_sig: no definition of 'relu' found", for a missing closing brace."""
    import utils
    src = ("torch::Tensor relu(torch::Tensor x) {\n"
           "    auto out = torch::empty_like(x);\n"
           "    if (x.numel() > 0) {\n"
           "        out = x.clamp_min(0);\n"
           "    return out;\n")
    with pytest.raises(ValueError, match=r"get_sig: the braces do not balance: the '\{' on line 1 "
                       r"is never closed \(torch::Tensor relu\(torch::Tensor x\) \{\)"):
        utils.get_sig("relu", src)
    assert utils.get_sig("relu", src + "}\n}\n") == "torch::Tensor relu(torch::Tensor x);"


# ---- gpu_course/cuda/parsed.py: one source read once
def test_parsed_source_finds_kernels_behind_attributes_and_templates():
    from gpu_course.cuda.parsed import ParsedSource
    p = ParsedSource('''#include <cuda_pipeline.h>
#include "local.h"
template <int TW> __global__ void __launch_bounds__(256) tiled_k(float* x) { x[0] = TW; }
__device__ float twice(float v) { return 2 * v; }
namespace ops { __global__ void scale_k(float* x, float s); __global__ void scale_k(float* x, float s) { x[0] *= s; } }
void run(torch::Tensor x) { tiled_k<16><<<1, 32>>>(x.data_ptr<float>()); }
''')
    assert p.kernels == ("scale_k", "tiled_k")
    assert [(f.qualifier, f.name, f.body is not None) for f in p.functions] == [
        ("__global__", "tiled_k", True), ("__device__", "twice", True),
        ("__global__", "scale_k", False), ("__global__", "scale_k", True)]
    assert {n: " ".join(t.text for t in b) for n, b in p.kernel_bodies.items()} == {
        "tiled_k": "x [ 0 ] = TW ;", "scale_k": "x [ 0 ] *= s ;"}
    assert p.includes == [(1, "cuda_pipeline.h"), (2, "local.h")]
    assert {"run", "twice", "tiled_k", "scale_k"} <= p.called and "data_ptr" not in p.called  # data_ptr<float>(
    assert p.declaration("run") == "void run(torch::Tensor x);"
    assert p.declaration("scale_k") == "__global__ void scale_k(float* x, float s);" and p.declaration("nope") is None


def test_parse_keeps_a_source_by_text_and_reads_it_once(monkeypatch):
    from gpu_course.cuda import parsed
    read = []
    real = cxx.tokenize
    monkeypatch.setattr(cxx, "tokenize", lambda text, *a, **k: read.append(text) or real(text, *a, **k))
    parsed.parse.cache_clear()
    src = "__global__ void k(int* p) { *p = 1; }\nvoid f(int* p) { k<<<1, 1>>>(p); }"
    p = parsed.parse(src)
    assert read == []  # nothing is read before it is asked for
    assert p.kernels == ("k",) and p.declaration("f") == "void f(int* p);" and "k" in p.called
    assert parsed.parse(src) is p and parsed.parse(src).toks is p.toks
    assert read == [src]
