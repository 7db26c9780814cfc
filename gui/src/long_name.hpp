// Long tensor names (HuggingFace's run to 50 characters and differ only at their ends) shown so that
// the end, where the layer is named, always shows.
#pragma once

#include <string>
#include <string_view>

#include <imgui.h>

namespace fpscope::gui {

// `name` whole when it fits in `width` pixels of the current font, else abbreviated from the left
// ("...h.11.attn.c_attn").
inline std::string left_abbreviated(std::string_view name, float width) {
  std::string text(name);
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  for (std::size_t from = 1; from < text.size(); ++from) {
    if ((static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) continue;  // never half a UTF-8 sequence
    std::string shown = "..." + text.substr(from);
    if (ImGui::CalcTextSize(shown.c_str()).x <= width) return shown;
  }
  return "...";
}

}  // namespace fpscope::gui
