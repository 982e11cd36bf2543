//! Profiles and selectors on the request path: the renaming step every model
//! request takes once before its model is looked up.

use std::borrow::Cow;

use axum::body::Body;
use axum::response::Response;
use http_body_util::BodyExt;

use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::names::{Lead, Pinned, UpstreamPin};
use crate::selection::Reservation;

/// A requested name after the active profile and selectors had their say.
#[derive(Debug)]
pub(crate) struct Renamed {
    /// The name to look the model up by (and to show upstream and to filters).
    pub(crate) name: String,
    /// The client's name was replaced.
    pub(crate) changed: bool,
    /// A spillover selector's hold on its target, to keep until the response ends.
    pub(crate) hold: Option<Reservation>,
    /// The selector that chose the name, if one did.
    pub(crate) selector: Option<String>,
}

/// The renaming step of body, form and query requests: the active profile's pin,
/// then a selector (the rules are [`crate::names`]'s; which profile is active
/// and what a selector picks are [`crate::selection`]'s).
///
/// # Errors
///
/// 404 for a name the active profile disables, 503 when a selector has no
/// target it can use.
pub(crate) async fn rename(state: &AppState, requested: &str) -> Result<Renamed, ApiError> {
    let (names, selection) = (&state.inner.names, &state.inner.selection);
    let pinned = match names.pinned(selection.active_index(), requested) {
        Pinned::No => requested,
        Pinned::To(target) => target,
        Pinned::Disabled { profile } => {
            return Err(ApiError::ModelDisabled {
                model: requested.to_owned(),
                profile: profile.to_owned(),
            });
        }
    };
    let Some(Lead::Selector { id: selector, .. }) = names.lead(pinned) else {
        return Ok(Renamed {
            changed: pinned != requested,
            name: pinned.to_owned(),
            hold: None,
            selector: None,
        });
    };
    let running = if selection.needs_states(selector) {
        state.inner.router.running().await
    } else {
        Vec::new()
    };
    match selection.choose(selector, &running) {
        // The table and the selection are made from one configuration.
        None => Err(ApiError::ModelNotFound {
            model: requested.to_owned(),
        }),
        Some(Ok(pick)) => {
            tracing::debug!(selector = pinned, target = %pick.target, model = %pick.model, "selector chose");
            Ok(Renamed {
                name: pick.target,
                changed: true,
                hold: pick.reservation,
                selector: Some(pinned.to_owned()),
            })
        }
        Some(Err(error)) => Err(ApiError::SelectorUnavailable {
            selector: pinned.to_owned(),
            source: error,
        }),
    }
}

/// The renaming step of `/upstream/<tail>`: only the active profile's pins
/// apply (by longest prefix); selectors do not.
///
/// # Errors
///
/// 404 when the pin that matched disables its name.
pub(crate) fn rename_upstream<'a>(
    state: &AppState,
    tail: &'a str,
) -> Result<Cow<'a, str>, ApiError> {
    let active = state.inner.selection.active_index();
    match state.inner.names.upstream_pin(active, tail) {
        UpstreamPin::No => Ok(Cow::Borrowed(tail)),
        UpstreamPin::To(rewritten) => Ok(Cow::Owned(rewritten)),
        UpstreamPin::Disabled { pin, profile } => Err(ApiError::ModelDisabled {
            model: pin.to_owned(),
            profile: profile.to_owned(),
        }),
    }
}

/// Makes `response`'s body hold `hold` until it ends or is dropped.
pub(crate) fn hold_until_body_ends<H: Send + 'static>(
    response: Response,
    hold: Option<H>,
) -> Response {
    let Some(hold) = hold else {
        return response;
    };
    response.map(|body| {
        Body::new(body.map_frame(move |frame| {
            let _held = &hold;
            frame
        }))
    })
}
