// A combo box over a list of choices, labelled by the library's own name function: the app never
// restates a list of names (activations, precisions, rounding modes, scaling kinds).
#pragma once

#include <imgui.h>

#include <cstddef>
#include <string>

namespace fpscope::gui {

template <typename Choice, std::size_t N, typename Name>
bool choice_combo(const char* label, Choice& value, const Choice (&choices)[N], Name name_of) {
  bool changed = false;
  if (ImGui::BeginCombo(label, std::string(name_of(value)).c_str())) {
    for (const Choice& choice : choices)
      if (ImGui::Selectable(std::string(name_of(choice)).c_str(), choice == value)) value = choice, changed = true;
    ImGui::EndCombo();
  }
  return changed;
}

}  // namespace fpscope::gui
