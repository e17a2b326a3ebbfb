//! The PithTrain rank label, `rank=N; pp=R/S dp=R/S cp=R/S ep=R/S; mbs=M seq=Q`: an NVTX range
//! each rank pushes around its profiled step (analyses.md §1.2).

use regex::Regex;
use std::sync::LazyLock;

/// The label's exact shape (PithTrain's `SETUP_PATTERN`).
static LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^rank=(\d+); pp=(\d+)/(\d+) dp=(\d+)/(\d+) cp=(\d+)/(\d+) ep=(\d+)/(\d+); mbs=(\d+) seq=(\d+)$",
    )
    .expect("valid regex")
});

/// A rank's position along one mesh axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct AxisCoord {
    /// Index along the axis, from 0.
    pub rank: u32,
    /// Size of the axis.
    pub size: u32,
}

/// A parsed rank label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankLabel {
    /// Global rank.
    pub rank: u32,
    /// Pipeline-parallel coordinate.
    pub pp: AxisCoord,
    /// Data-parallel coordinate.
    pub dp: AxisCoord,
    /// Context-parallel coordinate.
    pub cp: AxisCoord,
    /// Expert-parallel coordinate.
    pub ep: AxisCoord,
    /// Micro-batch size.
    pub mbs: u32,
    /// Sequence length.
    pub seq: u32,
}

impl RankLabel {
    /// Parses text that is exactly a rank label (surrounding whitespace allowed); None otherwise.
    pub fn parse(text: &str) -> Option<RankLabel> {
        let caps = LABEL.captures(text.trim())?;
        let n = |i: usize| caps[i].parse::<u32>().ok();
        let axis = |i: usize| {
            Some(AxisCoord {
                rank: n(i)?,
                size: n(i + 1)?,
            })
        };
        Some(RankLabel {
            rank: n(1)?,
            pp: axis(2)?,
            dp: axis(4)?,
            cp: axis(6)?,
            ep: axis(8)?,
            mbs: n(10)?,
            seq: n(11)?,
        })
    }

    /// Whether text is exactly a rank label (PithTrain's `SETUP_PATTERN`, anchored, no trimming).
    pub fn matches_exactly(text: &str) -> bool {
        LABEL.is_match(text)
    }

    /// Parses the label the way PithTrain's `show_setup` does, from tokens rather than the exact
    /// shape: whitespace-separated tokens containing `=`, trimmed of `;`, split at the first `=`
    /// (a repeated key keeps its last value). Err names the first key missing or unreadable.
    pub fn parse_tokens(text: &str) -> Result<RankLabel, String> {
        let mut fields: Vec<(&str, &str)> = Vec::new();
        for token in text.split_whitespace().filter(|t| t.contains('=')) {
            let token = token.trim_matches(';');
            if let Some((key, value)) = token.split_once('=') {
                fields.retain(|(k, _)| *k != key);
                fields.push((key, value));
            }
        }
        let get = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("no `{key}=` in it"))
        };
        let int = |key: &str, value: &str| {
            value
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("`{key}={value}` is not a number"))
        };
        let axis = |key: &str| -> Result<AxisCoord, String> {
            let value = get(key)?;
            let (rank, size) = value
                .split_once('/')
                .ok_or_else(|| format!("`{key}={value}` is not rank/size"))?;
            Ok(AxisCoord {
                rank: int(key, rank)?,
                size: int(key, size)?,
            })
        };
        Ok(RankLabel {
            rank: int("rank", get("rank")?)?,
            pp: axis("pp")?,
            dp: axis("dp")?,
            cp: axis("cp")?,
            ep: axis("ep")?,
            mbs: int("mbs", get("mbs")?)?,
            seq: int("seq", get("seq")?)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "rank=5; pp=1/2 dp=0/1 cp=0/2 ep=1/4; mbs=1 seq=4096";

    fn expected() -> RankLabel {
        RankLabel {
            rank: 5,
            pp: AxisCoord { rank: 1, size: 2 },
            dp: AxisCoord { rank: 0, size: 1 },
            cp: AxisCoord { rank: 0, size: 2 },
            ep: AxisCoord { rank: 1, size: 4 },
            mbs: 1,
            seq: 4096,
        }
    }

    #[test]
    fn exact_labels_parse_both_ways() {
        assert_eq!(RankLabel::parse(TEXT), Some(expected()));
        assert_eq!(RankLabel::parse_tokens(TEXT), Ok(expected()));
        assert!(RankLabel::matches_exactly(TEXT));
    }

    #[test]
    fn other_text_is_not_a_label() {
        assert_eq!(RankLabel::parse("forward chunk 3 (phase0)"), None);
        assert_eq!(RankLabel::parse(&format!("x {TEXT}")), None);
        assert!(!RankLabel::matches_exactly(&format!("{TEXT} ")));
    }

    #[test]
    fn tokens_tolerate_order_and_repeats_but_name_what_is_missing() {
        let shuffled = "seq=4096 rank=9; ep=1/4 cp=0/2 dp=0/1 pp=1/2; mbs=1 rank=5;";
        assert_eq!(RankLabel::parse_tokens(shuffled), Ok(expected()));
        assert_eq!(
            RankLabel::parse_tokens("rank=1; pp=0/2"),
            Err("no `dp=` in it".to_string())
        );
        assert_eq!(
            RankLabel::parse_tokens("ncclCommInitRank"),
            Err("no `rank=` in it".to_string())
        );
    }
}
