// UI scale: every size in the app is written for a 13-pixel font and scaled by the font in use,
// so one setting (--ui-scale, Ctrl +/-/0, the monitor's content scale by default) grows text,
// widgets, margins and plots together.
#pragma once

#include <imgui.h>

namespace fpscope::gui {

inline constexpr float base_font_pixels = 13.0f;  // Dear ImGui's default font
inline constexpr float min_ui_scale = 0.5f, max_ui_scale = 4.0f;

// A length given for scale 1, in pixels at the current scale.
inline float px(float logical) { return logical * ImGui::GetFontSize() / base_font_pixels; }
inline ImVec2 px(float x, float y) { return ImVec2(px(x), px(y)); }

// Loads the font at 13 x scale pixels (Dear ImGui's own font at 1; DejaVu Sans Mono where
// installed for other scales, as the bitmap-like default blurs when scaled) and scales the style.
// Call between frames, with the OpenGL backend initialised.
void apply_ui_scale(float scale);
float current_ui_scale();

// The scale a window on this monitor should start with: its content scale (X11: Xft.dpi / 96),
// rounded to a quarter and clamped to [min_ui_scale, max_ui_scale].
float default_ui_scale(float content_scale);

}  // namespace fpscope::gui
