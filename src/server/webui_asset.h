// server/webui_asset.h — the web page (src/server/webui/index.html: chat playground and KV-cache
// inspector, plain HTML/CSS/JS with no external resources), linked into the binary.
#pragma once

#include <string_view>

namespace kvforge::server {

std::string_view WebUiHtml();

}  // namespace kvforge::server
