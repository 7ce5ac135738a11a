// RolesNamedByTemplate on hand-written snippets and on real templates from tests/data.
#include "chat/template_roles.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_paths.h"

namespace kvforge::chat {
namespace {

using Roles = std::vector<std::string>;

TEST(TemplateRolesTest, ComparisonsAndMembershipLists) {
  EXPECT_EQ(RolesNamedByTemplate("{% if message['role'] == 'user' %}"), Roles{"user"});
  EXPECT_EQ(RolesNamedByTemplate("{% if message.role != \"system\" %}"), Roles{"system"});
  EXPECT_EQ(RolesNamedByTemplate("{% if m.role in ['ipython', \"tool\"] %}"),
            (Roles{"ipython", "tool"}));
  EXPECT_EQ(RolesNamedByTemplate("{% if message['role']=='model' %}{% if role == 'user' %}"),
            (Roles{"model", "user"}));
  // Not role comparisons: other names, non-identifiers, a different variable.
  EXPECT_EQ(RolesNamedByTemplate("{{ roles == 'x' }}{{ role == 'a b' }}{{ name == 'bob' }}"),
            Roles{});
  EXPECT_EQ(RolesNamedByTemplate(""), Roles{});
}

TEST(TemplateRolesTest, RealTemplatesNameTheirExtraRoles) {
  const std::string dir = kvforge::testing::SharedDir() + "/chat-templates/";
  const Roles llama = RolesNamedByTemplate(
      kvforge::testing::ReadFileOrDie(dir + "meta-llama-Llama-3.1-8B-Instruct.jinja"));
  EXPECT_NE(std::find(llama.begin(), llama.end(), "ipython"), llama.end());
  // Gemma renders assistant turns as "model" (`set role = 'model'`): an output name, not a role
  // a request may send.
  EXPECT_EQ(
      RolesNamedByTemplate(kvforge::testing::ReadFileOrDie(dir + "google-gemma-2-2b-it.jinja")),
      (Roles{"assistant", "system", "user"}));
}

}  // namespace
}  // namespace kvforge::chat
