//! One budget for a whole run: the model requests (`--max-requests`,
//! setting `max_requests`) and their cost (`--max-budget-usd`, setting
//! `max_budget_usd`) of the main agent, its sub-agents and its in-process
//! teammates together. A Session creates one [`RunBudget`] and every Task it
//! starts, directly or through sub-agents, shares it (an `Arc`).
//!
//! It only counts and answers "is there room for one more request"; it
//! never stops anything itself and never prints: the Task asks before each
//! request and ends when the answer is no. A request is charged as soon as
//! its reply stream ends, and under a cost limit a Task runs the tools of
//! a reply only then, so a sub-agent's requests see their parent's: the
//! run passes the budget by at most the requests in flight when it is
//! reached (one for each agent running at that moment).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use kaji_protocol::Usage;

/// The cost of a request's usage in USD.
pub type Pricing = std::sync::Arc<dyn Fn(&Usage) -> f64 + Send + Sync>;

/// The price of a model's requests, when its prices are known: the one
/// place a [`Pricing`] is made (a Task's cost, the run
/// budget's fallback).
pub(crate) fn pricing(info: &kaji_llm::pricing::ModelInfo) -> Option<Pricing> {
    info.prices.map(|prices| {
        let price: Pricing =
            std::sync::Arc::new(move |usage| kaji_llm::pricing::cost_usd(usage, &prices));
        price
    })
}

/// What a run may spend, and what it has spent.
#[derive(Default)]
pub struct RunBudget {
    max_requests: Option<u64>,
    max_cost_usd: Option<f64>,
    /// Prices requests whose Task has no price of its own (a sub-agent
    /// on another model): the session model's.
    fallback_price: Option<Pricing>,
    requests: AtomicU64,
    cost_usd: Mutex<f64>,
}

impl std::fmt::Debug for RunBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunBudget")
            .field("max_requests", &self.max_requests)
            .field("max_cost_usd", &self.max_cost_usd)
            .field("requests", &self.requests())
            .field("cost_usd", &self.cost_usd())
            .finish()
    }
}

/// Why there is no room for another request.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetSpent {
    /// `max_requests` requests were made.
    Requests(u64),
    /// The cost reached `max_budget_usd`.
    Cost {
        /// The limit.
        max: f64,
        /// Spent so far.
        spent: f64,
    },
}

impl BudgetSpent {
    /// The `stop_reason` of a Task this ended: `max_requests` or
    /// `max_budget_usd`.
    pub fn stop_reason(&self) -> &'static str {
        match self {
            Self::Requests(_) => "max_requests",
            Self::Cost { .. } => "max_budget_usd",
        }
    }
}

impl std::fmt::Display for BudgetSpent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Requests(n) => write!(
                f,
                "The request limit of the run ({n}, --max-requests) was reached."
            ),
            Self::Cost { max, spent } => write!(
                f,
                "The budget of the run (${max:.2}, --max-budget-usd) was reached: ${spent:.4} spent."
            ),
        }
    }
}

impl RunBudget {
    /// A budget of at most `max_requests` requests and `max_cost_usd`
    /// dollars (`None`: no limit); `price` prices requests of Tasks that
    /// have no price of their own.
    pub fn new(
        max_requests: Option<u64>,
        max_cost_usd: Option<f64>,
        price: Option<Pricing>,
    ) -> Self {
        Self {
            max_requests,
            max_cost_usd,
            fallback_price: price,
            ..Self::default()
        }
    }

    /// A budget without limits.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Whether a cost limit is set but nothing can be priced: the cost is
    /// unknown, so the limit cannot stop anything (the caller warns).
    pub fn cost_limit_unenforceable(&self) -> bool {
        self.max_cost_usd.is_some() && self.fallback_price.is_none()
    }

    /// Whether a cost limit is set: a reply's tools then wait for its
    /// charge (the stream's end) before they run.
    pub fn limits_cost(&self) -> bool {
        self.max_cost_usd.is_some()
    }

    /// Whether the cost limit is reached (no request is taken).
    pub fn check_cost(&self) -> Result<(), BudgetSpent> {
        let Some(max) = self.max_cost_usd else {
            return Ok(());
        };
        let spent = self.cost_usd();
        if spent >= max {
            return Err(BudgetSpent::Cost { max, spent });
        }
        Ok(())
    }

    /// Why no request is left, when none is (no request is taken).
    pub fn spent(&self) -> Option<BudgetSpent> {
        if let Err(spent) = self.check_cost() {
            return Some(spent);
        }
        self.max_requests
            .filter(|max| self.requests() >= *max)
            .map(BudgetSpent::Requests)
    }

    /// Takes one request from the budget, or says why there is none left.
    pub fn start_request(&self) -> Result<(), BudgetSpent> {
        self.check_cost()?;
        match self.max_requests {
            None => {
                self.requests.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            Some(max) => self
                .requests
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < max).then_some(n + 1)
                })
                .map(|_| ())
                .map_err(|_| BudgetSpent::Requests(max)),
        }
    }

    /// Adds what a request used: `cost` when its Task knows its price,
    /// else the fallback price of `usage`.
    pub fn charge(&self, cost: Option<f64>, usage: &Usage) {
        let cost = cost.or_else(|| self.fallback_price.as_ref().map(|p| p(usage)));
        if let Some(c) = cost {
            *self.cost_usd.lock().unwrap_or_else(|e| e.into_inner()) += c;
        }
    }

    /// Requests started so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Cost so far, in USD (of what could be priced).
    pub fn cost_usd(&self) -> f64 {
        *self.cost_usd.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn requests_are_bounded_across_sharers() {
        let b = Arc::new(RunBudget::new(Some(3), None, None));
        let c = Arc::clone(&b);
        assert_eq!(b.start_request(), Ok(()));
        assert_eq!(c.start_request(), Ok(()));
        assert_eq!(b.start_request(), Ok(()));
        assert_eq!(c.start_request(), Err(BudgetSpent::Requests(3)));
        assert_eq!(b.requests(), 3);
        assert_eq!(c.spent(), Some(BudgetSpent::Requests(3)));
        assert_eq!(RunBudget::new(Some(1), None, None).spent(), None);
    }

    #[test]
    fn cost_stops_once_reached_and_unpriced_cost_never_does() {
        let price: Pricing = Arc::new(|u: &Usage| u.output_tokens as f64 * 0.5);
        let b = RunBudget::new(None, Some(1.0), Some(price));
        let usage = Usage {
            output_tokens: 1,
            ..Usage::default()
        };
        assert!(b.start_request().is_ok());
        b.charge(None, &usage);
        assert!(b.start_request().is_ok());
        assert_eq!(b.spent(), None);
        b.charge(Some(0.5), &usage);
        assert!(matches!(b.start_request(), Err(BudgetSpent::Cost { .. })));
        assert!(matches!(b.spent(), Some(BudgetSpent::Cost { .. })));
        assert_eq!(b.requests(), 2, "a refused request is not counted");

        let unpriced = RunBudget::new(None, Some(0.01), None);
        assert!(unpriced.cost_limit_unenforceable());
        for _ in 0..10 {
            unpriced.charge(None, &usage);
            assert!(unpriced.start_request().is_ok());
        }
    }
}
