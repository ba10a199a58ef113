//! From the parsed file to something runnable.
//!
//! * [`plan_file`] checks everything that can be checked before running (element types and
//!   parents, step keys, element names referenced by steps and expectations, attribute names and
//!   value shapes, option names) and reports the first problem with its JSON path.
//! * [`build_tree`], [`add_element`] and [`apply_fields`] turn element records into a
//!   [`fairsched_hdrf::Tree`], the way the upstream test mock builds its trees.

use super::attribute::{self, Actual, AttrExpr, Kind};
use super::compare;
use super::format::{
    ComparisonKind, Conventions, Derived, ElementFields, ElementType, Expectation, File,
    GuaranteeType, LimitValue, LimitsMap, Mode, OptionsPatch, ResourceMap, Step, StepType,
};
use fairsched_hdrf::{
    ElementIndex, FifoSortParameter, IntegralGuaranteeType, IntegralGuarantees, OperationSpec,
    PoolMode, PoolSpec, ROOT, ResourceVolume, Tree, UpdateOptions,
};
use fairsched_resources::{PartialResources, ResourceVector, Resources};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A problem in the input, at a JSON path (`cases.3.steps.1.set.weigth`).
#[derive(Debug, Clone, PartialEq)]
pub struct FormatError {
    pub path: String,
    pub message: String,
}

impl FormatError {
    fn at(path: impl Into<String>, message: impl Into<String>) -> FormatError {
        FormatError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// A checked file.
#[derive(Debug)]
pub struct Plan {
    pub cases: Vec<CasePlan>,
    /// Things worth telling that do not stop the run (e.g. a comparison the conventions list and
    /// this tool does not know).
    pub warnings: Vec<String>,
}

/// A checked case.
#[derive(Debug)]
pub struct CasePlan {
    pub id: String,
    /// One run per variant (parametrisation); each run starts from a fresh tree.
    pub variants: Vec<Variant>,
    pub total: Resources,
    /// Initial elements; the first is the root.
    pub elements: Vec<ElementDef>,
    pub steps: Vec<StepPlan>,
    /// Non-failing remarks about the case (e.g. a data file that was not copied).
    pub notes: Vec<String>,
}

/// One run of a case: its label in reports and its options before step options.
#[derive(Debug, Clone)]
pub struct Variant {
    /// `null`, or the parameter values as a JSON object.
    pub label: Value,
    pub options: UpdateOptions,
}

/// A checked element record.
#[derive(Debug, Clone)]
pub struct ElementDef {
    pub name: String,
    pub element_type: ElementType,
    pub parent: Option<String>,
    pub fields: ElementFields,
}

/// What a step does.
#[derive(Debug)]
pub enum Action {
    /// A fair-share update of the persistent tree.
    Update(UpdateSpec),
    /// Updates of clones of the tree (the persistent tree is left alone).
    CompareVariants(UpdateSpec),
    Mutate {
        element: String,
        fields: ElementFields,
    },
    AddElement(ElementDef),
}

/// Inputs of an update besides the tree.
#[derive(Debug)]
pub struct UpdateSpec {
    pub now_seconds: f64,
    pub previous_update_seconds: Option<f64>,
    pub options: OptionsPatch,
    pub total: Option<Resources>,
}

/// A checked step.
#[derive(Debug)]
pub struct StepPlan {
    pub action: Action,
    pub checks: Vec<Check>,
    /// Upstream assertions documented as implementation-specific: not asserted, only shown with
    /// `--derived`.
    pub implementation_specific: Vec<Check>,
    pub derived: Option<DerivedPlan>,
}

/// A checked expectation.
#[derive(Debug)]
pub enum Check {
    /// `near`, `exact`, `not_dominated_by`, or `dominates` against a value.
    Value {
        element: String,
        attribute: AttrExpr,
        comparison: ComparisonKind,
        tolerance: f64,
        expected: Actual,
    },
    /// `dominates` between two attributes of one element.
    Dominates {
        element: String,
        lhs: AttrExpr,
        rhs: AttrExpr,
    },
    EqualAcross {
        elements: Vec<String>,
        attribute: AttrExpr,
        tolerance: f64,
        variants: Vec<OptionsPatch>,
    },
    NoFailure,
    /// A comparison or attribute the file's conventions define and this tool does not implement:
    /// always a failing assertion.
    Unsupported {
        element: Option<String>,
        attribute: Option<String>,
        comparison: String,
        expected: Value,
        reason: String,
    },
}

/// Soft values of a step (`derived_not_asserted`).
#[derive(Debug, Default)]
pub struct DerivedPlan {
    pub values: Vec<DerivedValue>,
    pub errors: Option<Vec<String>>,
    /// Entries that could not be used (unknown element or attribute, bad value).
    pub problems: Vec<String>,
}

/// One soft value.
#[derive(Debug)]
pub struct DerivedValue {
    pub element: String,
    pub attribute: AttrExpr,
    pub expected: Actual,
}

/// Comparison and attribute names the file's `conventions` block defines. A name defined there
/// that this tool does not implement makes a failing assertion rather than a malformed file.
#[derive(Debug, Default)]
struct Defined {
    comparisons: BTreeSet<String>,
    attributes: BTreeSet<String>,
}

impl Defined {
    fn from(conventions: &Conventions) -> Defined {
        let mut d = Defined::default();
        for name in conventions.comparisons.iter().flat_map(BTreeMap::keys) {
            d.comparisons.insert(name.clone());
        }
        for name in conventions.attributes.iter().flat_map(BTreeMap::keys) {
            match name.rsplit_once('.') {
                Some((prefix, last)) if last.contains('|') => {
                    for part in last.split('|') {
                        d.attributes.insert(format!("{prefix}.{part}"));
                    }
                }
                _ => {
                    d.attributes.insert(name.clone());
                }
            }
        }
        d
    }
}

/// Checks a parsed file.
pub fn plan_file(file: &File) -> Result<Plan, FormatError> {
    let mut warnings = Vec::new();
    let mut base = UpdateOptions::default();
    let defined = file
        .conventions
        .as_ref()
        .map(Defined::from)
        .unwrap_or_default();
    if let Some(conventions) = &file.conventions {
        if let Some(fixed) = &conventions.fixed_options {
            fixed.apply(&mut base);
        }
        if let Some(default) = &conventions.default_options {
            default.apply(&mut base);
        }
        check_conventions(conventions, &mut warnings);
    }
    let mut cases = Vec::with_capacity(file.cases.len());
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for (i, case) in file.cases.iter().enumerate() {
        let path = format!("cases.{i}");
        if let Some(previous) = ids.insert(&case.id, i) {
            warnings.push(format!(
                "{path}.id: case id `{}` is also used by cases.{previous}",
                case.id
            ));
        }
        cases.push(plan_case(&path, case, &base, &defined)?);
    }
    Ok(Plan { cases, warnings })
}

fn check_conventions(conventions: &Conventions, warnings: &mut Vec<String>) {
    if let Some(comparisons) = &conventions.comparisons {
        for name in comparisons.keys() {
            if !ComparisonKind::ALL.iter().any(|c| c.name() == name) {
                warnings.push(format!(
                    "conventions.comparisons: `{name}` is not implemented by this tool"
                ));
            }
        }
    }
    if let Some(attributes) = &conventions.attributes {
        for name in attributes.keys() {
            if !attribute::conventions_name_known(name) {
                warnings.push(format!(
                    "conventions.attributes: `{name}` is not known to this tool"
                ));
            }
        }
    }
}

fn plan_case(
    path: &str,
    case: &super::format::Case,
    base: &UpdateOptions,
    defined: &Defined,
) -> Result<CasePlan, FormatError> {
    let variants = plan_variants(path, case.parametrized_over.as_ref(), base)?;
    let total = resources(&case.total_resources);

    // Elements, in order. The root is implicit (`<Root>`) unless the first record is one.
    let mut known: HashMap<String, ElementType> = HashMap::new();
    let mut elements = Vec::with_capacity(case.elements.len() + 1);
    let root_name = match case.elements.first() {
        Some(first) if first.element_type == Some(ElementType::Root) => None,
        _ => Some("<Root>".to_string()),
    };
    if let Some(name) = root_name {
        known.insert(name.clone(), ElementType::Root);
        elements.push(ElementDef {
            name,
            element_type: ElementType::Root,
            parent: None,
            fields: ElementFields::default(),
        });
    }
    for (j, record) in case.elements.iter().enumerate() {
        let def = plan_element(&format!("{path}.elements.{j}"), record, &known, j == 0)?;
        known.insert(def.name.clone(), def.element_type);
        elements.push(def);
    }

    let mut steps = Vec::with_capacity(case.steps.len());
    for (j, step) in case.steps.iter().enumerate() {
        steps.push(plan_step(
            &format!("{path}.steps.{j}"),
            step,
            &mut known,
            defined,
        )?);
    }

    let mut notes = Vec::new();
    if let Some(data_file) = &case.data_file {
        let copied = data_file
            .get("copied")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let file = data_file.get("path").and_then(Value::as_str).unwrap_or("?");
        if !copied {
            notes.push(format!(
                "the case refers to the data file `{file}`, which is not copied into it; it runs on the {} element(s) it lists",
                case.elements.len()
            ));
        }
    }

    Ok(CasePlan {
        id: case.id.clone(),
        variants,
        total,
        elements,
        steps,
        notes,
    })
}

fn plan_variants(
    path: &str,
    params: Option<&BTreeMap<String, Vec<Value>>>,
    base: &UpdateOptions,
) -> Result<Vec<Variant>, FormatError> {
    let mut variants = vec![(serde_json::Map::new(), base.clone())];
    for (name, values) in params.into_iter().flatten() {
        let ppath = format!("{path}.parametrized_over.{name}");
        if values.is_empty() {
            return Err(FormatError::at(ppath, "no values to run over"));
        }
        let mut next = Vec::with_capacity(variants.len() * values.len());
        for (label, options) in &variants {
            for (k, value) in values.iter().enumerate() {
                let mut object = serde_json::Map::new();
                object.insert(name.clone(), value.clone());
                let patch: OptionsPatch =
                    serde_json::from_value(Value::Object(object)).map_err(|e| {
                        let message = e.to_string();
                        // An unknown option is the parameter's name; a bad value is the value.
                        let at = if message.starts_with("unknown field") {
                            ppath.clone()
                        } else {
                            format!("{ppath}.{k}")
                        };
                        FormatError::at(at, message)
                    })?;
                let mut label = label.clone();
                label.insert(name.clone(), value.clone());
                let mut options = options.clone();
                patch.apply(&mut options);
                next.push((label, options));
            }
        }
        variants = next;
    }
    Ok(variants
        .into_iter()
        .map(|(label, options)| Variant {
            label: if label.is_empty() {
                Value::Null
            } else {
                Value::Object(label)
            },
            options,
        })
        .collect())
}

/// A serde path as `cases.3.steps.1.set.weigth` (empty for the document itself).
pub fn dotted(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    path.iter()
        .map(|segment| match segment {
            Segment::Seq { index } => index.to_string(),
            Segment::Map { key } => key.clone(),
            Segment::Enum { variant } => variant.clone(),
            _ => "?".to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Deserializes a JSON value with paths relative to `prefix`.
fn from_value<T: serde::de::DeserializeOwned>(
    prefix: &str,
    value: &Value,
) -> Result<T, FormatError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = dotted(e.path());
        let path = if inner.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}.{inner}")
        };
        FormatError::at(path, e.into_inner().to_string())
    })
}

fn plan_element(
    path: &str,
    record: &ElementFields,
    known: &HashMap<String, ElementType>,
    first: bool,
) -> Result<ElementDef, FormatError> {
    let name = record
        .id
        .clone()
        .ok_or_else(|| FormatError::at(format!("{path}.id"), "missing field `id`"))?;
    let element_type = record
        .element_type
        .ok_or_else(|| FormatError::at(format!("{path}.type"), "missing field `type`"))?;
    if known.contains_key(&name) {
        return Err(FormatError::at(
            format!("{path}.id"),
            format!("duplicate element id `{name}`"),
        ));
    }
    let parent = match element_type {
        ElementType::Root => {
            if !first {
                return Err(FormatError::at(
                    format!("{path}.type"),
                    "a root element must be the first element of the case",
                ));
            }
            if record.parent.is_some() {
                return Err(FormatError::at(
                    format!("{path}.parent"),
                    "the root has no parent",
                ));
            }
            None
        }
        ElementType::Pool | ElementType::Operation => {
            let parent = record.parent.clone().ok_or_else(|| {
                FormatError::at(format!("{path}.parent"), "missing field `parent`")
            })?;
            match known.get(&parent) {
                None => {
                    return Err(FormatError::at(
                        format!("{path}.parent"),
                        format!("unknown parent element `{parent}` (parents must come first)"),
                    ));
                }
                Some(ElementType::Operation) => {
                    return Err(FormatError::at(
                        format!("{path}.parent"),
                        format!("parent `{parent}` is an operation and cannot have children"),
                    ));
                }
                Some(_) => {}
            }
            Some(parent)
        }
    };
    check_fields(path, record, element_type)?;
    Ok(ElementDef {
        name,
        element_type,
        parent,
        fields: record.clone(),
    })
}

/// Checks that the fields present apply to the element type, and their values.
fn check_fields(
    path: &str,
    fields: &ElementFields,
    element_type: ElementType,
) -> Result<(), FormatError> {
    let wrong = |names: Vec<&'static str>| -> Result<(), FormatError> {
        match names.first() {
            Some(name) => Err(FormatError::at(
                format!("{path}.{name}"),
                format!(
                    "not applicable to an element of type `{}`",
                    element_type.name()
                ),
            )),
            None => Ok(()),
        }
    };
    match element_type {
        ElementType::Root => {
            wrong(fields.pool_fields())?;
            wrong(fields.operation_fields())?;
        }
        ElementType::Pool => wrong(fields.operation_fields())?,
        ElementType::Operation => wrong(fields.pool_fields())?,
    }
    if let Some(w) = fields.weight
        && !(w.is_finite() && w > 0.0)
    {
        return Err(FormatError::at(
            format!("{path}.weight"),
            format!("weight must be a positive number, found {w}"),
        ));
    }
    if let Some(Some(ig)) = &fields.integral_guarantees
        && let Some(m) = ig.relaxed_share_multiplier_limit
        && !m.is_finite()
    {
        return Err(FormatError::at(
            format!("{path}.integral_guarantees.relaxed_share_multiplier_limit"),
            "must be a finite number",
        ));
    }
    Ok(())
}

fn plan_step(
    path: &str,
    step: &Step,
    known: &mut HashMap<String, ElementType>,
    defined: &Defined,
) -> Result<StepPlan, FormatError> {
    let kind = step.step_type;
    let not_allowed = |present: bool, key: &str| -> Result<(), FormatError> {
        if present {
            Err(FormatError::at(
                format!("{path}.{key}"),
                format!("not allowed in a `{}` step", kind.name()),
            ))
        } else {
            Ok(())
        }
    };
    let runs_update = matches!(kind, StepType::Update | StepType::CompareVariants);
    if !runs_update {
        not_allowed(step.now_seconds.is_some(), "now_seconds")?;
        not_allowed(
            step.previous_update_seconds.is_some(),
            "previous_update_seconds",
        )?;
        not_allowed(step.options.is_some(), "options")?;
        not_allowed(step.total_resources.is_some(), "total_resources")?;
        not_allowed(step.expect.is_some(), "expect")?;
        not_allowed(
            step.upstream_implementation_specific_assertions.is_some(),
            "upstream_implementation_specific_assertions",
        )?;
        not_allowed(step.derived_not_asserted.is_some(), "derived_not_asserted")?;
    }
    if kind != StepType::Mutate {
        not_allowed(step.set.is_some(), "set")?;
    }
    if runs_update {
        not_allowed(step.element.is_some(), "element")?;
    }

    let action = match kind {
        StepType::Update | StepType::CompareVariants => {
            let spec = UpdateSpec {
                now_seconds: step.now_seconds.unwrap_or(0.0),
                previous_update_seconds: step.previous_update_seconds.flatten(),
                options: step.options.clone().unwrap_or_default(),
                total: step.total_resources.as_ref().map(resources),
            };
            if kind == StepType::Update {
                Action::Update(spec)
            } else {
                Action::CompareVariants(spec)
            }
        }
        StepType::Mutate => {
            let epath = format!("{path}.element");
            let element = match &step.element {
                Some(Value::String(s)) => s.clone(),
                Some(_) => {
                    return Err(FormatError::at(
                        epath,
                        "expected the id of the element to change",
                    ));
                }
                None => return Err(FormatError::at(epath, "missing field `element`")),
            };
            let element_type = *known.get(&element).ok_or_else(|| {
                FormatError::at(epath.clone(), format!("unknown element `{element}`"))
            })?;
            let spath = format!("{path}.set");
            let set = step
                .set
                .as_ref()
                .ok_or_else(|| FormatError::at(spath.clone(), "missing field `set`"))?;
            let fields: ElementFields = from_value(&spath, set)?;
            for (present, key) in [
                (fields.id.is_some(), "id"),
                (fields.element_type.is_some(), "type"),
                (fields.parent.is_some(), "parent"),
            ] {
                if present {
                    return Err(FormatError::at(
                        format!("{spath}.{key}"),
                        "cannot be changed by `mutate`",
                    ));
                }
            }
            check_fields(&spath, &fields, element_type)?;
            Action::Mutate { element, fields }
        }
        StepType::AddElement => {
            let epath = format!("{path}.element");
            let value = step
                .element
                .as_ref()
                .ok_or_else(|| FormatError::at(epath.clone(), "missing field `element`"))?;
            let record: ElementFields = from_value(&epath, value)?;
            if record.element_type == Some(ElementType::Root) {
                return Err(FormatError::at(
                    format!("{epath}.type"),
                    "a root cannot be added",
                ));
            }
            let def = plan_element(&epath, &record, known, false)?;
            known.insert(def.name.clone(), def.element_type);
            Action::AddElement(def)
        }
    };

    let mut checks = Vec::new();
    for (k, e) in step.expect.iter().flatten().enumerate() {
        checks.push(plan_check(
            &format!("{path}.expect.{k}"),
            e,
            known,
            defined,
        )?);
    }
    let mut implementation_specific = Vec::new();
    for (k, e) in step
        .upstream_implementation_specific_assertions
        .iter()
        .flatten()
        .enumerate()
    {
        implementation_specific.push(plan_check(
            &format!("{path}.upstream_implementation_specific_assertions.{k}"),
            e,
            known,
            defined,
        )?);
    }
    let derived = step
        .derived_not_asserted
        .as_ref()
        .map(|d| plan_derived(d, known));
    Ok(StepPlan {
        action,
        checks,
        implementation_specific,
        derived,
    })
}

fn plan_check(
    path: &str,
    e: &Expectation,
    known: &HashMap<String, ElementType>,
    defined: &Defined,
) -> Result<Check, FormatError> {
    let Some(comparison) = ComparisonKind::from_name(&e.comparison) else {
        if defined.comparisons.contains(&e.comparison) {
            return Ok(Check::Unsupported {
                element: e.element.clone(),
                attribute: e.attribute.clone(),
                comparison: e.comparison.clone(),
                expected: e.value.clone().unwrap_or(Value::Null),
                reason: format!(
                    "the comparison `{}` is defined by the file's conventions but not implemented by this tool",
                    e.comparison
                ),
            });
        }
        return Err(FormatError::at(
            format!("{path}.comparison"),
            format!(
                "unknown comparison `{}` (known: {})",
                e.comparison,
                ComparisonKind::ALL.map(ComparisonKind::name).join(", ")
            ),
        ));
    };
    // An attribute the conventions define but this tool does not know.
    for text in [&e.attribute, &e.lhs, &e.rhs].into_iter().flatten() {
        let unknown: Vec<&str> = text
            .split('+')
            .map(str::trim)
            .filter(|t| attribute::lookup(t).is_none())
            .collect();
        if !unknown.is_empty() && unknown.iter().all(|t| defined.attributes.contains(*t)) {
            return Ok(Check::Unsupported {
                element: e.element.clone(),
                attribute: Some(text.clone()),
                comparison: e.comparison.clone(),
                expected: e.value.clone().unwrap_or(Value::Null),
                reason: format!(
                    "the attribute `{}` is defined by the file's conventions but not implemented by this tool",
                    unknown.join("`, `")
                ),
            });
        }
    }
    let unexpected = |present: bool, key: &str| -> Result<(), FormatError> {
        if present {
            Err(FormatError::at(
                format!("{path}.{key}"),
                format!("not used by the comparison `{}`", comparison.name()),
            ))
        } else {
            Ok(())
        }
    };
    let element = |required: bool| -> Result<Option<String>, FormatError> {
        match &e.element {
            Some(name) if known.contains_key(name) => Ok(Some(name.clone())),
            Some(name) => Err(FormatError::at(
                format!("{path}.element"),
                format!("unknown element `{name}`"),
            )),
            None if required => Err(FormatError::at(
                format!("{path}.element"),
                "missing field `element`",
            )),
            None => Ok(None),
        }
    };
    let attribute = |key: &str, text: &Option<String>| -> Result<AttrExpr, FormatError> {
        let text = text.as_ref().ok_or_else(|| {
            FormatError::at(format!("{path}.{key}"), format!("missing field `{key}`"))
        })?;
        AttrExpr::parse(text).map_err(|m| FormatError::at(format!("{path}.{key}"), m))
    };
    let value = |kind: Kind| -> Result<Actual, FormatError> {
        let v = e
            .value
            .as_ref()
            .ok_or_else(|| FormatError::at(format!("{path}.value"), "missing field `value`"))?;
        attribute::parse_expected(kind, v).map_err(|m| FormatError::at(format!("{path}.value"), m))
    };
    let tolerance = |default: f64| -> Result<f64, FormatError> {
        match e.tolerance {
            Some(t) if !(t.is_finite() && t >= 0.0) => Err(FormatError::at(
                format!("{path}.tolerance"),
                "must be a non-negative number",
            )),
            Some(t) => Ok(t),
            None => Ok(default),
        }
    };
    let ordered = |attr: &AttrExpr, key: &str| -> Result<(), FormatError> {
        match attr.kind() {
            Kind::Vector | Kind::Scalar => Ok(()),
            _ => Err(FormatError::at(
                format!("{path}.{key}"),
                format!(
                    "`{}` is not a vector or a number; `{}` needs one",
                    attr.text,
                    comparison.name()
                ),
            )),
        }
    };

    match comparison {
        ComparisonKind::Near | ComparisonKind::Exact | ComparisonKind::NotDominatedBy => {
            unexpected(e.elements.is_some(), "elements")?;
            unexpected(e.variants.is_some(), "variants")?;
            unexpected(e.lhs.is_some(), "lhs")?;
            unexpected(e.rhs.is_some(), "rhs")?;
            let element = element(true)?.unwrap_or_default();
            let attribute = attribute("attribute", &e.attribute)?;
            let tolerance = match comparison {
                ComparisonKind::Near => tolerance(compare::DEFAULT_NEAR_TOLERANCE)?,
                _ => {
                    unexpected(e.tolerance.is_some(), "tolerance")?;
                    compare::EXACT_TOLERANCE
                }
            };
            if comparison == ComparisonKind::NotDominatedBy {
                ordered(&attribute, "attribute")?;
            }
            let expected = value(attribute.kind())?;
            Ok(Check::Value {
                element,
                attribute,
                comparison,
                tolerance,
                expected,
            })
        }
        ComparisonKind::Dominates => {
            unexpected(e.elements.is_some(), "elements")?;
            unexpected(e.variants.is_some(), "variants")?;
            unexpected(e.tolerance.is_some(), "tolerance")?;
            let element = element(true)?.unwrap_or_default();
            if e.lhs.is_some() || e.rhs.is_some() {
                unexpected(e.attribute.is_some(), "attribute")?;
                unexpected(e.value.is_some(), "value")?;
                let lhs = attribute("lhs", &e.lhs)?;
                let rhs = attribute("rhs", &e.rhs)?;
                ordered(&lhs, "lhs")?;
                ordered(&rhs, "rhs")?;
                if lhs.kind() != rhs.kind() {
                    return Err(FormatError::at(
                        format!("{path}.rhs"),
                        format!("`{}` and `{}` have different shapes", lhs.text, rhs.text),
                    ));
                }
                Ok(Check::Dominates { element, lhs, rhs })
            } else {
                let attribute = attribute("attribute", &e.attribute)?;
                ordered(&attribute, "attribute")?;
                let expected = value(attribute.kind())?;
                Ok(Check::Value {
                    element,
                    attribute,
                    comparison,
                    tolerance: 0.0,
                    expected,
                })
            }
        }
        ComparisonKind::EqualAcrossOptionVariants => {
            unexpected(e.value.is_some(), "value")?;
            unexpected(e.lhs.is_some(), "lhs")?;
            unexpected(e.rhs.is_some(), "rhs")?;
            let mut elements = Vec::new();
            if let Some(single) = element(false)? {
                elements.push(single);
            }
            for (k, name) in e.elements.iter().flatten().enumerate() {
                if !known.contains_key(name) {
                    return Err(FormatError::at(
                        format!("{path}.elements.{k}"),
                        format!("unknown element `{name}`"),
                    ));
                }
                elements.push(name.clone());
            }
            if elements.is_empty() {
                return Err(FormatError::at(
                    format!("{path}.elements"),
                    "missing field `elements`",
                ));
            }
            let attribute = attribute("attribute", &e.attribute)?;
            let variants = e.variants.clone().unwrap_or_default();
            if variants.len() < 2 {
                return Err(FormatError::at(
                    format!("{path}.variants"),
                    "needs at least two option variants",
                ));
            }
            Ok(Check::EqualAcross {
                elements,
                attribute,
                tolerance: tolerance(0.0)?,
                variants,
            })
        }
        ComparisonKind::NoFailure => {
            for (present, key) in [
                (e.element.is_some(), "element"),
                (e.elements.is_some(), "elements"),
                (e.attribute.is_some(), "attribute"),
                (e.value.is_some(), "value"),
                (e.tolerance.is_some(), "tolerance"),
                (e.variants.is_some(), "variants"),
                (e.lhs.is_some(), "lhs"),
                (e.rhs.is_some(), "rhs"),
            ] {
                unexpected(present, key)?;
            }
            Ok(Check::NoFailure)
        }
    }
}

/// Soft values are never a reason to reject a file: what cannot be used is listed as a problem.
fn plan_derived(d: &Derived, known: &HashMap<String, ElementType>) -> DerivedPlan {
    let mut plan = DerivedPlan {
        errors: d.errors.clone(),
        ..DerivedPlan::default()
    };
    for (element, attributes) in &d.fair_shares {
        if !known.contains_key(element) {
            plan.problems
                .push(format!("derived value for unknown element `{element}`"));
            continue;
        }
        for (name, value) in attributes {
            let parsed = AttrExpr::parse(name).and_then(|attribute| {
                attribute::parse_expected(attribute.kind(), value)
                    .map(|expected| (attribute, expected))
            });
            match parsed {
                Ok((attribute, expected)) => plan.values.push(DerivedValue {
                    element: element.clone(),
                    attribute,
                    expected,
                }),
                Err(m) => plan
                    .problems
                    .push(format!("derived value {element} {name}: {m}")),
            }
        }
    }
    plan
}

// ---------------------------------------------------------------------------------------------
// Tree construction.

/// Absolute amounts (missing key = 0; cpu rounded half away from zero to 0.01, integer
/// resources truncated, as YTsaurus converts doubles).
pub fn resources(map: &ResourceMap) -> Resources {
    let mut r = Resources::ZERO;
    for (kind, value) in map.entries() {
        if let Some(v) = value {
            r.set(kind, v);
        }
    }
    r
}

/// Only the keys present are configured (strong guarantees).
fn partial(map: &ResourceMap) -> PartialResources {
    let mut r = PartialResources::EMPTY;
    for (kind, value) in map.entries() {
        if let Some(v) = value {
            r.set(kind, v);
        }
    }
    r
}

/// Limits: `"inf"` = unlimited (absent), a number = a hard limit, a missing key = 0.
fn limits(map: &LimitsMap) -> PartialResources {
    let mut r = PartialResources::EMPTY;
    for (kind, value) in map.entries() {
        match value {
            Some(LimitValue::Infinite) => r.set_raw(kind, None),
            Some(LimitValue::Finite(v)) => r.set(kind, v),
            None => r.set_raw(kind, Some(0)),
        }
    }
    r
}

/// Resource × seconds; cpu rounded to 0.01.
fn volume(map: &ResourceMap) -> ResourceVolume {
    ResourceVolume::from_values(map.entries().map(|(_, x)| x.unwrap_or(0.0)))
}

fn integral(record: Option<&super::format::IntegralGuaranteesRecord>) -> IntegralGuarantees {
    let Some(r) = record else {
        return IntegralGuarantees::default();
    };
    let defaults = IntegralGuarantees::default();
    IntegralGuarantees {
        guarantee_type: match r.guarantee_type {
            GuaranteeType::None => IntegralGuaranteeType::None,
            GuaranteeType::Burst => IntegralGuaranteeType::Burst,
            GuaranteeType::Relaxed => IntegralGuaranteeType::Relaxed,
        },
        resource_flow: resources(&r.resource_flow),
        burst_guarantee_resources: resources(&r.burst_guarantee_resources),
        relaxed_share_multiplier_limit: r.relaxed_share_multiplier_limit,
        can_accept_free_volume: r
            .can_accept_free_volume
            .unwrap_or(defaults.can_accept_free_volume),
        should_distribute_free_volume_among_children: r
            .should_distribute_free_volume_among_children
            .unwrap_or(defaults.should_distribute_free_volume_among_children),
    }
}

/// A pool as the upstream test mock makes one: FIFO order by weight (descending, stable), gang
/// step function allowed, everything else off.
fn mock_pool_spec() -> PoolSpec {
    PoolSpec {
        fifo_sort_parameters: vec![FifoSortParameter::Weight],
        allow_gang_step_function: true,
        ..PoolSpec::default()
    }
}

/// Element name -> index in the tree.
pub type Names = HashMap<String, ElementIndex>;

/// Builds the initial tree of a case.
pub fn build_tree(case: &CasePlan) -> Result<(Tree, Names), String> {
    let mut tree = Tree::new();
    let mut names = Names::new();
    for def in &case.elements {
        add_element(&mut tree, &mut names, def)?;
    }
    Ok((tree, names))
}

/// Appends an element (the root record renames and configures the existing root).
pub fn add_element(tree: &mut Tree, names: &mut Names, def: &ElementDef) -> Result<(), String> {
    let index = match def.element_type {
        ElementType::Root => {
            tree.element_mut(ROOT).name = def.name.clone();
            ROOT
        }
        ElementType::Pool | ElementType::Operation => {
            let parent_name = def.parent.as_deref().unwrap_or_default();
            let parent = *names
                .get(parent_name)
                .ok_or_else(|| format!("unknown parent `{parent_name}`"))?;
            let weight = def.fields.weight.unwrap_or(1.0);
            let added = if def.element_type == ElementType::Pool {
                tree.add_pool(parent, def.name.clone(), weight, mock_pool_spec())
            } else {
                tree.add_operation(parent, def.name.clone(), weight, OperationSpec::default())
            };
            added.map_err(|e| format!("cannot add `{}`: {e}", def.name))?
        }
    };
    names.insert(def.name.clone(), index);
    apply_fields(tree, index, &def.fields);
    Ok(())
}

/// Applies the fields present to an existing element (fields that do not apply to its type are
/// rejected by [`plan_file`] and ignored here).
pub fn apply_fields(tree: &mut Tree, index: ElementIndex, f: &ElementFields) {
    let element = tree.element_mut(index);
    if let Some(w) = f.weight {
        element.weight = w;
    }
    if let Some(l) = &f.resource_limits {
        element.resource_limits = l.as_ref().map_or(PartialResources::EMPTY, limits);
    }
    if let Some(v) = &f.initial_accumulated_resource_volume {
        element.integral_state.accumulated_volume = volume(v);
    }
    if let Some(pool) = element.pool_mut() {
        if let Some(mode) = f.mode {
            pool.mode = match mode {
                Mode::FairShare => PoolMode::FairShare,
                Mode::Fifo => PoolMode::Fifo,
            };
        }
        if let Some(sg) = &f.strong_guarantee_resources {
            pool.strong_guarantee_resources = partial(sg);
        }
        if let Some(ig) = &f.integral_guarantees {
            pool.integral_guarantees = integral(ig.as_ref());
        }
        if let Some(x) = f.fifo_children_reordering_for_guarantee_utilization_enabled {
            pool.enable_fifo_children_reordering_for_guarantee_utilization = x;
        }
        if let Some(x) = f.promised_guarantee_fair_share_computation_enabled {
            pool.enable_promised_guarantee_fair_share = x;
        }
        if let Some(x) = f.priority_strong_guarantee_adjustment_enabled {
            pool.priority_strong_guarantee_adjustment = x;
        }
        if let Some(x) = f.priority_strong_guarantee_adjustment_donorship_enabled {
            pool.priority_strong_guarantee_adjustment_donorship = x;
        }
        if let Some(x) = f.allow_gang_step_function {
            pool.allow_gang_step_function = x;
        }
    }
    if let Some(op) = element.operation_mut() {
        if let Some(d) = &f.resource_demand {
            op.demand = resources(d);
        }
        if let Some(u) = &f.resource_usage {
            op.usage = resources(u);
        }
        if let Some(g) = f.gang {
            op.gang = g;
        }
        if let Some(b) = f.best_allocation_share {
            op.best_allocation_share = ResourceVector(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairsched_resources::ResourceKind;

    #[test]
    fn limits_inf_is_unlimited_and_missing_is_zero() {
        let map: LimitsMap =
            serde_json::from_str(r#"{"user_slots": "inf", "cpu": 40.005, "memory": 800}"#).unwrap();
        let l = limits(&map);
        assert_eq!(l.raw_of(ResourceKind::UserSlots), None);
        assert_eq!(l.raw_of(ResourceKind::Cpu), Some(4001));
        assert_eq!(l.raw_of(ResourceKind::Gpu), Some(0));
        assert_eq!(l.raw_of(ResourceKind::Memory), Some(800));
    }

    #[test]
    fn cpu_rounds_half_away_from_zero() {
        let map: ResourceMap = serde_json::from_str(r#"{"cpu": 0.125, "memory": 10.9}"#).unwrap();
        let r = resources(&map);
        assert_eq!(r.raw_of(ResourceKind::Cpu), 13);
        assert_eq!(r.raw_of(ResourceKind::Memory), 10);
        let v = volume(&serde_json::from_str(r#"{"cpu": 1.234, "memory": 0.5}"#).unwrap());
        assert_eq!(v.values(), [0.0, 1.23, 0.0, 0.5, 0.0]);
    }
}
