// Controls that share a line where the view has room for them, else start the next: in a narrow
// window a row of controls ran off the view's edge, the last ones out of reach.
#pragma once

#include <imgui.h>

namespace fpscope::gui {

// A checkbox's width with its label.
inline float checkbox_width(const char* label) {
  return ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x;
}

// An item `frame` pixels wide (a combo, an input field) with its label after it.
inline float labelled_width(float frame, const char* label) { return frame + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x; }

// A button's width with its label (a small button's too: only its height differs).
inline float button_width(const char* label) { return ImGui::CalcTextSize(label).x + 2 * ImGui::GetStyle().FramePadding.x; }

// The next item, `width` pixels wide, on the current line where it fits there, else on the next.
inline void same_line_if_room(float width) {
  ImGui::SameLine();
  if (ImGui::GetContentRegionAvail().x < width) ImGui::NewLine();
}

}  // namespace fpscope::gui
