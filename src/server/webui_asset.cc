#include "server/webui_asset.h"

extern "C" const char kvf_webui_html_begin[];
extern "C" const char kvf_webui_html_end[];

namespace kvforge::server {

std::string_view WebUiHtml() {
  return {kvf_webui_html_begin, static_cast<size_t>(kvf_webui_html_end - kvf_webui_html_begin)};
}

}  // namespace kvforge::server
