// value.h — the dynamic value of the chat-template interpreter: a small Python object model.
//
// A Value is undefined, None, bool, int (int64), float (double), str (UTF-8), list, tuple, dict
// (insertion ordered, Python key equality), namespace (Jinja2's namespace()) or an opaque
// interpreter object (macro, bound method, loop context, ...). Scalars live inline; strings and
// containers are reference counted, so copying a Value is cheap and lists/dicts alias like Python
// objects do (a template that appends to a list sees the change through every reference).
//
// Invariants:
//  * Strings hold UTF-8 bytes; Python-level operations (len, slicing) count code points.
//  * A container marked frozen is never mutated: values handed to ChatTemplate::Render (messages,
//    tools, extra variables) are frozen so concurrent renders can share them; templates may only
//    mutate containers they created themselves.
//  * An undefined Value remembers why it is undefined so errors read like Jinja2's.
//  * Destroying arbitrarily deep nested containers does not recurse on the C++ stack.
//
// Thread-safety: a Value is an immutable handle; copies may be used from several threads as long as
// nobody mutates a shared non-frozen container concurrently (the interpreter never mutates frozen
// ones). Reference counts are atomic (std::shared_ptr).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvforge::chat {

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kDict,
  kNamespace,
  kObject,
  kIterator,  // a one-shot generator (what map/select/... return in Jinja2)
};

// Why a Value is undefined; picks the Jinja2-style message.
enum class UndefinedWhy : uint8_t {
  kPlain,      // "None" message-less undefined (e.g. a missing optional argument)
  kName,       // "'x' is undefined"
  kAttribute,  // "'dict object' has no attribute 'x'"
  kElement,    // "list object has no element 7"
  kHint,       // a free-form message
};

struct ListRep;
struct DictRep;
class Object;

class Value {
 public:
  Value() = default;  // undefined

  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) {
    Value v(Kind::kBool);
    v.i_ = b ? 1 : 0;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Kind::kInt);
    v.i_ = i;
    return v;
  }
  static Value Float(double f) {
    Value v(Kind::kFloat);
    v.f_ = f;
    return v;
  }
  static Value Str(std::string s);
  static Value Str(std::string_view s) { return Str(std::string(s)); }
  static Value Str(const char* s) { return Str(std::string(s)); }
  static Value Str(std::shared_ptr<const std::string> s);
  // A Markup string (the result of `safe`/`escape`): `+` with a plain string escapes the other
  // operand, as markupsafe does.
  static Value Markup(std::string s);
  static Value List(std::vector<Value> items = {});
  static Value Tuple(std::vector<Value> items);
  static Value Dict();
  static Value Namespace();
  static Value FromObject(std::shared_ptr<Object> obj);
  // A generator over `items`; `type_name` (static storage) is its Python type, e.g. "generator".
  static Value Iterator(std::vector<Value> items, const char* type_name = "generator");

  // Undefined values with a reason.
  static Value UndefinedName(std::shared_ptr<const std::string> name);
  static Value UndefinedName(std::string_view name);
  // `type_repr` is Jinja2's object_type_repr of the container, e.g. "dict object" or "None"; it
  // must be a string literal (static storage).
  static Value UndefinedAttribute(const char* type_repr, std::shared_ptr<const std::string> attr);
  static Value UndefinedAttribute(const char* type_repr, std::string_view attr);
  static Value UndefinedElement(const char* type_repr, std::string key_repr);
  static Value UndefinedHint(std::string hint);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers.Number: bool, int or float.
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence_like() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_iterator() const { return kind_ == Kind::kIterator; }

  bool bool_value() const { return i_ != 0; }
  int64_t int_value() const { return i_; }  // also bool as 0/1
  double float_value() const { return f_; }
  // bool/int/float as double.
  double number_as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }

  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  std::shared_ptr<const std::string> str_ptr() const {
    return std::shared_ptr<const std::string>(ptr_, &str());
  }
  // list, tuple or iterator
  ListRep& list() const { return *static_cast<ListRep*>(ptr_.get()); }
  DictRep& dict() const { return *static_cast<DictRep*>(ptr_.get()); }  // dict or namespace
  Object& object() const { return *static_cast<Object*>(ptr_.get()); }
  std::shared_ptr<Object> object_ptr() const;
  // Identity of the referenced heap object (strings, containers, objects), else null.
  const void* identity() const { return ptr_.get(); }
  // A weak reference to the heap object (used to break reference cycles after a render).
  std::weak_ptr<void> weak_ref() const { return ptr_; }

  // The Jinja2-style message for an undefined value.
  std::string UndefinedMessage() const;

  // Marks this container and everything reachable from it as immutable (see header comment).
  void Freeze() const;
  // A plain (non-Markup) copy of a string value.
  Value WithoutMarkup() const;

 private:
  explicit Value(Kind k) : kind_(k) {}

  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  UndefinedWhy why_ = UndefinedWhy::kPlain;
  union {
    int64_t i_ = 0;
    double f_;
    const char* type_repr_;  // undefined attribute/element: the container's type repr
  };
  // string: std::string; list/tuple: ListRep; dict/namespace: DictRep; object: Object;
  // undefined: std::string (name, attribute, element repr or hint) or null.
  std::shared_ptr<void> ptr_;
};

struct ListRep {
  ListRep() = default;
  explicit ListRep(std::vector<Value> v) : items(std::move(v)) {}
  ListRep(const ListRep&) = delete;
  ListRep& operator=(const ListRep&) = delete;
  ~ListRep();

  std::vector<Value> items;
  bool frozen = false;
  const char* iterator_type = nullptr;  // set for iterators: their Python type name
};

// Insertion-ordered mapping with Python key semantics (1 == 1.0 == True). String keys get a hash
// index once the dict grows past a few entries; other keys are found by a linear scan.
struct DictRep {
  DictRep() = default;
  DictRep(const DictRep&) = delete;
  DictRep& operator=(const DictRep&) = delete;
  ~DictRep();

  const Value* Find(const Value& key) const;
  const Value* FindStr(std::string_view key) const;
  // Inserts or overwrites (an overwritten key keeps its position, like Python).
  void Set(Value key, Value value);
  void SetStr(std::string_view key, Value value) { Set(Value::Str(key), std::move(value)); }
  bool Erase(const Value& key);
  void Clear();
  size_t size() const { return entries.size(); }

  std::vector<std::pair<Value, Value>> entries;
  bool frozen = false;

 private:
  ptrdiff_t IndexOf(const Value& key) const;
  ptrdiff_t IndexOfStr(std::string_view key) const;
  void Reindex();
  std::unordered_map<std::string_view, uint32_t> index_;  // views into entries' key strings
};

// Interpreter objects (macros, bound methods, loop contexts, cyclers). The interpreter downcasts
// by ObjectKind.
enum class ObjectKind : uint8_t { kMacro, kBuiltin, kBoundMethod, kLoop, kCycler, kJoiner, kRange };

class Object {
 public:
  virtual ~Object() = default;
  virtual ObjectKind object_kind() const = 0;
  // Python-ish type name used in messages ("Macro", "LoopContext").
  virtual std::string_view type_name() const = 0;
  virtual std::string Repr() const = 0;
  virtual bool callable() const { return true; }
};

// True when two keys are equal under Python dict semantics (numbers by value, strings by bytes,
// tuples element-wise, None == None). Unhashable kinds compare by identity.
bool KeyEquals(const Value& a, const Value& b);

}  // namespace kvforge::chat
