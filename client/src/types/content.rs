//! Message content: plain text or typed parts (text, images, audio, and any part
//! type the SDK does not know, kept as JSON).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// A message's content: plain text or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Typed parts.
    Parts(Vec<ContentPart>),
}

impl MessageContent {
    /// The text: the string itself, or the text of every text part joined.
    pub fn text(&self) -> String {
        match self {
            MessageContent::Text(t) => t.clone(),
            MessageContent::Parts(parts) => parts.iter().filter_map(ContentPart::as_text).collect(),
        }
    }
}

impl From<String> for MessageContent {
    fn from(text: String) -> Self {
        MessageContent::Text(text)
    }
}

impl From<&str> for MessageContent {
    fn from(text: &str) -> Self {
        MessageContent::Text(text.to_owned())
    }
}

impl From<Vec<ContentPart>> for MessageContent {
    fn from(parts: Vec<ContentPart>) -> Self {
        MessageContent::Parts(parts)
    }
}

/// One part of a multimodal message.
///
/// ```
/// use llama_swap_client::{ChatMessage, ContentPart, ImageDetail};
///
/// let msg = ChatMessage::user_parts([
///     ContentPart::text("What is in this picture?"),
///     ContentPart::image_url("data:image/png;base64,iVBORw0KGgo=").with_detail(ImageDetail::Low),
/// ]);
/// let json = serde_json::to_value(&msg).unwrap();
/// assert_eq!(json["content"][1]["image_url"]["detail"], "low");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ContentPart {
    /// `{"type": "text", "text": ...}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type": "image_url", "image_url": {"url": ..., "detail": ...}}`.
    ImageUrl {
        /// The image.
        image_url: ImageUrl,
    },
    /// `{"type": "input_audio", "input_audio": {"data": ..., "format": ...}}`.
    InputAudio {
        /// The audio.
        input_audio: InputAudio,
    },
    /// A part of another type (or a known type with an unexpected shape), kept as
    /// received and sent back unchanged.
    Other(Value),
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> ContentPart {
        ContentPart::Text { text: text.into() }
    }

    /// An image given by URL (`https://...` or a `data:` URL).
    pub fn image_url(url: impl Into<String>) -> ContentPart {
        ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: url.into(),
                detail: None,
            },
        }
    }

    /// Base64-encoded audio in `format` (`wav`, `mp3`, ...).
    pub fn input_audio(data: impl Into<String>, format: impl Into<String>) -> ContentPart {
        ContentPart::InputAudio {
            input_audio: InputAudio {
                data: data.into(),
                format: format.into(),
            },
        }
    }

    /// Sets the detail level of an image part; other parts are returned unchanged.
    #[must_use]
    pub fn with_detail(mut self, level: ImageDetail) -> ContentPart {
        if let ContentPart::ImageUrl { image_url } = &mut self {
            image_url.detail = Some(level);
        }
        self
    }

    /// The text of a text part.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentPart::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// An image reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ImageUrl {
    /// `https://...` or `data:image/...;base64,...`.
    pub url: String,
    /// How closely the model should look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ImageDetail>,
}

/// How closely a vision model looks at an image.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageDetail {
    /// The server decides.
    Auto,
    /// Low resolution, fewer tokens.
    Low,
    /// High resolution.
    High,
    /// Any other value, kept.
    Other(String),
}

impl ImageDetail {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            ImageDetail::Auto => "auto",
            ImageDetail::Low => "low",
            ImageDetail::High => "high",
            ImageDetail::Other(s) => s,
        }
    }
}

impl Serialize for ImageDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ImageDetail {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(match text.as_str() {
            "auto" => ImageDetail::Auto,
            "low" => ImageDetail::Low,
            "high" => ImageDetail::High,
            _ => ImageDetail::Other(text),
        })
    }
}

/// Audio input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InputAudio {
    /// Base64-encoded audio.
    pub data: String,
    /// The encoding (`wav`, `mp3`, ...).
    pub format: String,
}

impl Serialize for ContentPart {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let value = match self {
            ContentPart::Text { text } => json!({"type": "text", "text": text}),
            ContentPart::ImageUrl { image_url } => {
                json!({"type": "image_url", "image_url": image_url})
            }
            ContentPart::InputAudio { input_audio } => {
                json!({"type": "input_audio", "input_audio": input_audio})
            }
            ContentPart::Other(value) => return value.serialize(s),
        };
        value.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(typed_part(&value).unwrap_or(ContentPart::Other(value)))
    }
}

/// The typed reading of a part, or `None` when it is not one the SDK models.
fn typed_part(value: &Value) -> Option<ContentPart> {
    let obj: &Map<String, Value> = value.as_object()?;
    let part = match obj.get("type")?.as_str()? {
        "text" => ContentPart::text(obj.get("text")?.as_str()?),
        "image_url" => match obj.get("image_url")? {
            // Some clients send the URL as a bare string.
            Value::String(url) => ContentPart::image_url(url.as_str()),
            other => ContentPart::ImageUrl {
                image_url: ImageUrl::deserialize(other).ok()?,
            },
        },
        "input_audio" => ContentPart::InputAudio {
            input_audio: InputAudio::deserialize(obj.get("input_audio")?).ok()?,
        },
        _ => return None,
    };
    // A known type with extra keys is kept whole, so nothing is lost on the way back.
    let expected = match &part {
        ContentPart::Text { .. } => ["type", "text"],
        ContentPart::ImageUrl { .. } => ["type", "image_url"],
        _ => ["type", "input_audio"],
    };
    obj.keys()
        .all(|k| expected.contains(&k.as_str()))
        .then_some(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip_typed_and_unknown() {
        let wire = json!([
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "high"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "video_url", "video_url": {"url": "v"}},
            {"type": "text", "text": "t", "cache_control": {"type": "ephemeral"}}
        ]);
        let parts: Vec<ContentPart> = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(parts[0], ContentPart::text("look"));
        assert_eq!(
            parts[1],
            ContentPart::image_url("https://x/a.png").with_detail(ImageDetail::High)
        );
        assert_eq!(parts[2], ContentPart::input_audio("UklGRg==", "wav"));
        assert!(matches!(parts[3], ContentPart::Other(_)));
        assert!(matches!(parts[4], ContentPart::Other(_)));
        assert_eq!(serde_json::to_value(&parts).unwrap(), wire);
    }

    #[test]
    fn bare_string_image_url_is_read_as_an_image() {
        let part: ContentPart =
            serde_json::from_value(json!({"type": "image_url", "image_url": "https://x"})).unwrap();
        assert_eq!(part, ContentPart::image_url("https://x"));
    }

    #[test]
    fn unknown_detail_is_kept() {
        let part: ContentPart = serde_json::from_value(
            json!({"type": "image_url", "image_url": {"url": "u", "detail": "ultra"}}),
        )
        .unwrap();
        assert_eq!(
            part,
            ContentPart::image_url("u").with_detail(ImageDetail::Other("ultra".into()))
        );
    }
}
