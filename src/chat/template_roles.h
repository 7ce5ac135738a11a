// chat/template_roles.h — the message roles a chat template's source compares against
// (`message['role'] == 'ipython'`, `message.role in ['user', 'model']`), so that a server can
// accept the roles the model's template documents beyond the OpenAI API's own.
// Thread-safety: pure function. Cost: one pass over the source.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvforge::chat {

// Sorted, without duplicates; only identifier-like names ([A-Za-z_][A-Za-z0-9_]*).
std::vector<std::string> RolesNamedByTemplate(std::string_view source);

}  // namespace kvforge::chat
