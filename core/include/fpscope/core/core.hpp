// Everything in fpscope::core, for users who want one include.
#pragma once

#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/compare.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/e8m0.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/integral.hpp"
#include "fpscope/core/nan.hpp"
#include "fpscope/core/neighbours.hpp"
#include "fpscope/core/round_pack.hpp"
