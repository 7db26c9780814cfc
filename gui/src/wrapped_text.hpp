// Coloured text that wraps at the window's edge. ImGui's TextColored does not wrap: a sentence
// longer than the view is cut off at its edge, where no one can read the rest of it.
#pragma once

#include <imgui.h>

#include <cstdarg>

#include "palette.hpp"
#include "plot_frame.hpp"

namespace fpscope::gui {

inline void text_colored_wrapped(Rgb colour, const char* format, ...) IM_FMTARGS(2);
inline void text_colored_wrapped(Rgb colour, const char* format, ...) {
  ImGui::PushStyleColor(ImGuiCol_Text, to_imgui_vec4(colour));
  va_list arguments;
  va_start(arguments, format);
  ImGui::TextWrappedV(format, arguments);
  va_end(arguments);
  ImGui::PopStyleColor();
}

// ImGui's TextDisabled, wrapping.
inline void text_disabled_wrapped(const char* format, ...) IM_FMTARGS(1);
inline void text_disabled_wrapped(const char* format, ...) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  va_list arguments;
  va_start(arguments, format);
  ImGui::TextWrappedV(format, arguments);
  va_end(arguments);
  ImGui::PopStyleColor();
}

}  // namespace fpscope::gui
