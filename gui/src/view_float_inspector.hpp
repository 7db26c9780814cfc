// The Float inspector: a number's bits in every format, and arithmetic in one, with its state.
#pragma once

#include <iterator>
#include <string>
#include <string_view>
#include "fpscope/core/context.hpp"

namespace fpscope::gui {

class App;

// Float inspector state.
struct InspectorState {
  std::string text = "0.1";  // a number, or 0x... / 0b... bits of the selected format
  RoundingMode rounding = RoundingMode::nearest_even;
  bool flush_to_zero = false, denormals_are_zero = false, saturate = false;
  int detail = 3;  // the selected format (index into the inspector's list; 3: fp16)
  std::string custom = "e3m4";  // the custom row: eXmY, eXmYfn, eXmYfnuz or eXmYfinite
  // Arithmetic panel: a op b in the selected format.
  std::string a = "1", b = "0.0001";
  int op = 0;  // + - x / sqrt
  std::string report;  // what the last frame showed, for --report: the number's bits and value, the arithmetic
};

// The inspector's rows: fp64 fp32 tf32 fp16 bf16 e5m2 e4m3, then the custom format.
// The Float inspector's rows: its named formats, widest first, then the custom one.
inline constexpr const char* inspector_named_rows[] = {"fp64", "fp32",     "tf32",     "fp16",        "bf16", "e5m2", "e4m3",
                                                       "e5m2fnuz", "e4m3fnuz", "e4m3b11fnuz", "e3m2", "e2m3", "e2m1"};
inline constexpr int inspector_custom_index = static_cast<int>(std::size(inspector_named_rows));
int inspector_format_index(std::string_view name);  // the named row of the format (any of its names), -1 when none

void draw_float_inspector(App& app);

}  // namespace fpscope::gui
