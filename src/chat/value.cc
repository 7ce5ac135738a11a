#include "chat/value.h"

#include <cmath>

namespace kvforge::chat {
namespace {

bool HoldsChildren(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kDict:
    case Kind::kNamespace:
    case Kind::kObject:
    case Kind::kIterator:
      return true;
    default:
      return false;
  }
}

// Containers release their children through this graveyard so that destroying a deeply nested
// structure runs as a loop instead of recursing once per level.
thread_local std::vector<Value>* t_graveyard = nullptr;

void ReleaseValues(std::vector<Value>* items) {
  if (t_graveyard != nullptr) {
    for (Value& v : *items) {
      if (HoldsChildren(v)) t_graveyard->push_back(std::move(v));
    }
    items->clear();
    return;
  }
  std::vector<Value> graveyard;
  t_graveyard = &graveyard;
  for (Value& v : *items) {
    if (HoldsChildren(v)) graveyard.push_back(std::move(v));
  }
  items->clear();
  while (!graveyard.empty()) {
    Value last = std::move(graveyard.back());
    graveyard.pop_back();
    // `last` is destroyed here; its children land in `graveyard`.
  }
  t_graveyard = nullptr;
}

}  // namespace

Value Value::Str(std::string s) {
  Value v(Kind::kString);
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::Str(std::shared_ptr<const std::string> s) {
  Value v(Kind::kString);
  v.ptr_ = std::const_pointer_cast<std::string>(std::move(s));
  return v;
}

Value Value::Markup(std::string s) {
  Value v = Str(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v(Kind::kList);
  v.ptr_ = std::make_shared<ListRep>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v(Kind::kTuple);
  auto rep = std::make_shared<ListRep>(std::move(items));
  rep->frozen = true;
  v.ptr_ = std::move(rep);
  return v;
}

Value Value::Dict() {
  Value v(Kind::kDict);
  v.ptr_ = std::make_shared<DictRep>();
  return v;
}

Value Value::Namespace() {
  Value v(Kind::kNamespace);
  v.ptr_ = std::make_shared<DictRep>();
  return v;
}

Value Value::Iterator(std::vector<Value> items, const char* type_name) {
  Value v(Kind::kIterator);
  auto rep = std::make_shared<ListRep>(std::move(items));
  rep->iterator_type = type_name;
  v.ptr_ = std::move(rep);
  return v;
}

Value Value::FromObject(std::shared_ptr<Object> obj) {
  Value v(Kind::kObject);
  v.ptr_ = std::move(obj);
  return v;
}

std::shared_ptr<Object> Value::object_ptr() const {
  return std::shared_ptr<Object>(ptr_, static_cast<Object*>(ptr_.get()));
}

Value Value::UndefinedName(std::shared_ptr<const std::string> name) {
  Value v;
  v.why_ = UndefinedWhy::kName;
  v.ptr_ = std::const_pointer_cast<std::string>(std::move(name));
  return v;
}

Value Value::UndefinedName(std::string_view name) {
  return UndefinedName(std::make_shared<const std::string>(name));
}

Value Value::UndefinedAttribute(const char* type_repr, std::shared_ptr<const std::string> attr) {
  Value v;
  v.why_ = UndefinedWhy::kAttribute;
  v.type_repr_ = type_repr;
  v.ptr_ = std::const_pointer_cast<std::string>(std::move(attr));
  return v;
}

Value Value::UndefinedAttribute(const char* type_repr, std::string_view attr) {
  return UndefinedAttribute(type_repr, std::make_shared<const std::string>(attr));
}

Value Value::UndefinedElement(const char* type_repr, std::string key_repr) {
  Value v;
  v.why_ = UndefinedWhy::kElement;
  v.type_repr_ = type_repr;
  v.ptr_ = std::make_shared<std::string>(std::move(key_repr));
  return v;
}

Value Value::UndefinedHint(std::string hint) {
  Value v;
  v.why_ = UndefinedWhy::kHint;
  v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

std::string Value::UndefinedMessage() const {
  const std::string* text = static_cast<const std::string*>(ptr_.get());
  switch (why_) {
    case UndefinedWhy::kPlain:
      return "value is undefined";
    case UndefinedWhy::kName:
      return "'" + *text + "' is undefined";
    case UndefinedWhy::kAttribute:
      return "'" + std::string(type_repr_) + "' has no attribute '" + *text + "'";
    case UndefinedWhy::kElement:
      return std::string(type_repr_) + " has no element " + *text;
    case UndefinedWhy::kHint:
      return *text;
  }
  return "value is undefined";
}

void Value::Freeze() const {
  std::vector<Value> stack;
  stack.push_back(*this);
  while (!stack.empty()) {
    Value v = std::move(stack.back());
    stack.pop_back();
    if (v.is_list() || v.is_tuple()) {
      ListRep& rep = v.list();
      if (rep.frozen && v.is_list()) continue;
      rep.frozen = true;
      for (const Value& item : rep.items) {
        if (HoldsChildren(item)) stack.push_back(item);
      }
    } else if (v.is_dict() || v.is_namespace()) {
      DictRep& rep = v.dict();
      if (rep.frozen) continue;
      rep.frozen = true;
      for (const auto& [key, item] : rep.entries) {
        if (HoldsChildren(item)) stack.push_back(item);
      }
    }
  }
}

Value Value::WithoutMarkup() const {
  Value v = *this;
  v.markup_ = false;
  return v;
}

ListRep::~ListRep() { ReleaseValues(&items); }

DictRep::~DictRep() {
  index_.clear();
  std::vector<Value> values;
  values.reserve(entries.size());
  for (auto& entry : entries) {
    if (HoldsChildren(entry.first)) values.push_back(std::move(entry.first));
    if (HoldsChildren(entry.second)) values.push_back(std::move(entry.second));
  }
  entries.clear();
  ReleaseValues(&values);
}

bool KeyEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number_as_double() == b.number_as_double();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kTuple: {
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!KeyEquals(x[i], y[i])) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

constexpr size_t kIndexThreshold = 8;

ptrdiff_t DictRep::IndexOfStr(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(key);
    return it == index_.end() ? -1 : static_cast<ptrdiff_t>(it->second);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const Value& k = entries[i].first;
    if (k.is_string() && k.str() == key) return static_cast<ptrdiff_t>(i);
  }
  return -1;
}

ptrdiff_t DictRep::IndexOf(const Value& key) const {
  if (key.is_string()) return IndexOfStr(key.str());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (KeyEquals(entries[i].first, key)) return static_cast<ptrdiff_t>(i);
  }
  return -1;
}

const Value* DictRep::Find(const Value& key) const {
  ptrdiff_t i = IndexOf(key);
  return i < 0 ? nullptr : &entries[static_cast<size_t>(i)].second;
}

const Value* DictRep::FindStr(std::string_view key) const {
  ptrdiff_t i = IndexOfStr(key);
  return i < 0 ? nullptr : &entries[static_cast<size_t>(i)].second;
}

void DictRep::Set(Value key, Value value) {
  ptrdiff_t i = IndexOf(key);
  if (i >= 0) {
    entries[static_cast<size_t>(i)].second = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
  if (!index_.empty()) {
    const Value& k = entries.back().first;
    if (k.is_string()) index_.emplace(k.str(), static_cast<uint32_t>(entries.size() - 1));
  } else if (entries.size() > kIndexThreshold) {
    Reindex();
  }
}

bool DictRep::Erase(const Value& key) {
  ptrdiff_t i = IndexOf(key);
  if (i < 0) return false;
  entries.erase(entries.begin() + i);
  Reindex();
  return true;
}

void DictRep::Clear() {
  index_.clear();
  std::vector<Value> values;
  for (auto& entry : entries) {
    values.push_back(std::move(entry.first));
    values.push_back(std::move(entry.second));
  }
  entries.clear();
  ReleaseValues(&values);
}

void DictRep::Reindex() {
  index_.clear();
  if (entries.size() <= kIndexThreshold) return;
  index_.reserve(entries.size() * 2);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Value& k = entries[i].first;
    if (k.is_string()) index_.emplace(k.str(), static_cast<uint32_t>(i));
  }
}

}  // namespace kvforge::chat
