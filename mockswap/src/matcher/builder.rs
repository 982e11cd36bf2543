//! The condition methods of [`super::RequestMatch`], generated as inherent methods on
//! every rule type (`Expect`, `ReplyRule`, `FaultRule`), so a test reads the same
//! whichever it builds and needs no trait import.

/// Builder methods that add a condition to a rule's [`RequestMatch`]; generated on
/// every rule type so tests read the same everywhere.
macro_rules! match_methods {
    ($ty:ty) => {
        impl $ty {
            /// Only this HTTP method (see [`RequestMatch::method`]).
            pub fn method(mut self, method: impl AsRef<str>) -> Self {
                self.matcher = self.matcher.method(method);
                self
            }
            /// Only this path (see [`RequestMatch::path`]).
            pub fn path(mut self, path: impl Into<String>) -> Self {
                self.matcher = self.matcher.path(path);
                self
            }
            /// Only requests naming this model (see [`RequestMatch::model`]).
            pub fn model(mut self, model: impl Into<String>) -> Self {
                self.matcher = self.matcher.model(model);
                self
            }
            /// Only streaming (`true`) or non-streaming (`false`) requests.
            pub fn stream(mut self, stream: bool) -> Self {
                self.matcher = self.matcher.stream(stream);
                self
            }
            /// Only requests with the priority a caller sends (see
            /// [`RequestMatch::priority`]): an integer is exactly one well-formed
            /// `X-Priority: <value>`; llama-swap-client's `Priority` is what it sends
            /// (`Normal`: no header).
            pub fn priority(mut self, priority: impl Into<$crate::matcher::PriorityMatch>) -> Self {
                self.matcher = self.matcher.priority(priority);
                self
            }
            /// Only requests without an `X-Priority` header.
            pub fn priority_absent(mut self) -> Self {
                self.matcher = self.matcher.priority_absent();
                self
            }
            /// Only requests whose one `X-Priority` value is not a decimal `i32`.
            pub fn priority_invalid(mut self) -> Self {
                self.matcher = self.matcher.priority_invalid();
                self
            }
            /// Only requests with more than one `X-Priority` value.
            pub fn priority_duplicated(mut self) -> Self {
                self.matcher = self.matcher.priority_duplicated();
                self
            }
            /// Only requests whose one `X-Queue-Timeout` is this long (see
            /// [`RequestMatch::queue_timeout`]).
            pub fn queue_timeout(mut self, timeout: std::time::Duration) -> Self {
                self.matcher = self.matcher.queue_timeout(timeout);
                self
            }
            /// Only requests without an `X-Queue-Timeout` header.
            pub fn queue_timeout_absent(mut self) -> Self {
                self.matcher = self.matcher.queue_timeout_absent();
                self
            }
            /// Only requests with a line of this header whose value is exactly `value`.
            pub fn header(mut self, name: impl AsRef<str>, value: impl Into<String>) -> Self {
                self.matcher = self.matcher.header(name, value);
                self
            }
            /// Only requests that carry this header, with any value.
            pub fn header_exists(mut self, name: impl AsRef<str>) -> Self {
                self.matcher = self.matcher.header_exists(name);
                self
            }
            /// Only requests without this header.
            pub fn header_absent(mut self, name: impl AsRef<str>) -> Self {
                self.matcher = self.matcher.header_absent(name);
                self
            }
            /// Only requests whose query has `name=value`.
            pub fn query_param(
                mut self,
                name: impl Into<String>,
                value: impl Into<String>,
            ) -> Self {
                self.matcher = self.matcher.query_param(name, value);
                self
            }
            /// Only requests whose JSON body equals `body`.
            pub fn body_json(mut self, body: serde_json::Value) -> Self {
                self.matcher = self.matcher.body_json(body);
                self
            }
            /// Only requests whose JSON body contains `subset` (see
            /// [`RequestMatch::body_contains`]).
            pub fn body_contains(mut self, subset: serde_json::Value) -> Self {
                self.matcher = self.matcher.body_contains(subset);
                self
            }
            /// Only requests whose body text contains `text`.
            pub fn body_text_contains(mut self, text: impl Into<String>) -> Self {
                self.matcher = self.matcher.body_text_contains(text);
                self
            }
            /// Only requests whose last `messages` entry has this role.
            pub fn last_message_role(mut self, role: impl Into<String>) -> Self {
                self.matcher = self.matcher.last_message_role(role);
                self
            }
            /// Only requests that offer tools (`true`) or do not (`false`).
            pub fn has_tools(mut self, offered: bool) -> Self {
                self.matcher = self.matcher.has_tools(offered);
                self
            }
            /// Only requests for which `predicate` returns true.
            pub fn when(
                mut self,
                predicate: impl Fn(&$crate::RecordedRequest) -> bool + Send + Sync + 'static,
            ) -> Self {
                self.matcher = self.matcher.when(predicate);
                self
            }
            /// Adds every condition of `matcher`.
            pub fn matching(mut self, matcher: $crate::RequestMatch) -> Self {
                self.matcher = self.matcher.and(matcher);
                self
            }
        }
    };
}

pub(crate) use match_methods;
