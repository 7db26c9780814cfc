// Names of formats and rounding modes as users type them, and as fpscope prints them.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/block_format.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

class UnknownNameError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// fp16/binary16/half, bf16/bfloat16, fp32/binary32/single/float, fp64/binary64/double, tf32,
// e4m3 (OCP E4M3FN), e5m2, the OCP MX elements e2m1/fp4, e2m3, e3m2 (finite: no inf, no NaN),
// e4m3fnuz, e5m2fnuz, or a custom eXmY (IEEE flavour) / eXmYfn (OCP FN) / eXmYfnuz /
// eXmYfinite / eXmYieee with 2 <= X <= 11 (8 for fnuz and finite) and 1 <= Y <= 52, or a dtype
// as PyTorch, NumPy and ml_dtypes name it, with or without its module (float16, torch.bfloat16,
// float8_e4m3fn, float8_e4m3 (IEEE-style, with infinities), float8_e3m4, float6_e2m3fn,
// float4_e2m1fn, ...). Throws UnknownNameError naming the input otherwise.
Format parse_format(std::string_view name);
// Whether `name` names E8M0, the OCP MX block scale (e8m0, e8m0fnu, float8_e8m0fnu, with or without
// a dtype's module): no Format (it has no sign and no mantissa), so parse_format refuses it, saying so.
bool names_e8m0(std::string_view name);
// The name PyTorch, NumPy or ml_dtypes give the format's dtype ("float16", "bfloat16", "float8_e4m3fn",
// "float8_e4m3" for e4m3ieee, "float6_e2m3fn", ...), or "" where none has one (tf32, custom formats).
std::string dtype_name(Format f);
// The canonical name: "fp16", "bf16", ..., or "e6m9" / "e3m4fn" / "e3m3finite" for custom formats.
std::string format_name(Format f);
// What a flavour has and lacks, for people: "" for IEEE, "OCP FN: no infinities, one NaN (all
// ones)", "finite: no infinities, no NaN", "FNUZ: no infinities, no -0, one NaN (the pattern of -0)".
std::string flavour_description(Flavour flavour);
// The named formats, in the order fpscope lists them.
const std::vector<Format>& named_formats();
// What a cast into f gives for a value beyond its largest finite number: "infinity (±max when
// saturating)", "NaN (±max when saturating)", or "±max (it always saturates: no infinity, no NaN)".
std::string overflow_description(Format f);

// The block-scaled formats: mxfp8-e4m3 (mxfp8), mxfp8-e5m2, mxfp6-e2m3 (mxfp6), mxfp6-e3m2,
// mxfp4, mxint8 (blocks of 32, E8M0 scales) and nvfp4 (blocks of 16, E4M3 scales under a
// float32 tensor scale). Throws UnknownNameError naming the input otherwise.
BlockFormat parse_block_format(std::string_view name);
// The canonical name, without the block size: "mxfp8-e4m3", "nvfp4".
std::string block_format_name(const BlockFormat& format);
// The block-scaled formats, in the order fpscope lists them.
const std::vector<BlockFormat>& named_block_formats();
// floor (the OCP spec's, also "ocp"), round-up (also "ceil"), rceil, even.
ScaleRule parse_scale_rule(std::string_view name);
std::string scale_rule_name(ScaleRule rule);

// rne/nearest_even, rna/nearest_away, rz/toward_zero, ru/toward_positive, rd/toward_negative,
// odd, stochastic; TestFloat's near_even, near_maxMag, minMag, max, min are accepted too.
RoundingMode parse_rounding_mode(std::string_view name);
std::string rounding_mode_name(RoundingMode mode);
std::string describe_flags(std::uint8_t flags);
// "zero", "subnormal", "normal", "infinite", "quiet NaN", "signalling NaN".
std::string_view float_class_name(FloatClass c);

}  // namespace fpscope
